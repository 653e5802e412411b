use serde::{Deserialize, Serialize};

/// Byte counts in power-of-two buckets, as the kernel side fills them:
/// bucket 0 holds 0, bucket 1 holds 1, bucket k >= 2 holds (2^(k-2), 2^(k-1)],
/// and the last bucket also holds everything larger.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Histogram {
    pub buckets: Vec<u64>,
}

impl Histogram {
    /// Number of buckets the kernel side keeps (HIST_BUCKETS).
    pub const BUCKETS: usize = 32;

    pub fn from_buckets(mut buckets: Vec<u64>) -> Histogram {
        while buckets.last() == Some(&0) {
            buckets.pop();
        }
        Histogram { buckets }
    }

    /// The largest byte count bucket `k` holds; `None` for the open last one.
    pub fn upper_bound(k: usize) -> Option<u64> {
        match k {
            0 => Some(0),
            k if k + 1 >= Self::BUCKETS => None,
            k => Some(1u64 << (k - 1)),
        }
    }

    /// The bucket a byte count falls in (the kernel's size_bucket()).
    pub fn bucket_of(v: u64) -> usize {
        if v <= 1 {
            return v as usize;
        }
        let b = (64 - (v - 1).leading_zeros()) as usize + 1;
        b.min(Self::BUCKETS - 1)
    }

    pub fn total(&self) -> u64 {
        self.buckets.iter().sum()
    }

    pub fn add(&mut self, other: &Histogram) {
        if self.buckets.len() < other.buckets.len() {
            self.buckets.resize(other.buckets.len(), 0);
        }
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
    }

    /// The smallest bucket bound at or below which at least `share` of the
    /// counts fall: "90% of writes were of at most N bytes".
    pub fn bound_covering(&self, share: f64) -> Option<u64> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let mut seen = 0;
        for (k, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen as f64 >= share * total as f64 {
                return Self::upper_bound(k);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_match_the_kernel_side() {
        let cases = [(0, 0), (1, 1), (2, 2), (3, 3), (4, 3), (5, 4), (8, 4), (16, 5), (17, 6), (4096, 13)];
        for (v, b) in cases {
            assert_eq!(Histogram::bucket_of(v), b, "bucket of {v}");
            assert!(Histogram::upper_bound(b).unwrap() >= v);
        }
        assert_eq!(Histogram::bucket_of(u64::MAX), Histogram::BUCKETS - 1);
        assert_eq!(Histogram::upper_bound(Histogram::BUCKETS - 1), None);
    }

    #[test]
    fn bound_covering_finds_the_typical_size() {
        let mut b = vec![0; 14];
        b[1] = 95; // 1 byte
        b[13] = 5; // 4 KiB
        let h = Histogram::from_buckets(b);
        assert_eq!(h.bound_covering(0.9), Some(1));
        assert_eq!(h.bound_covering(1.0), Some(4096));
        assert_eq!(Histogram::default().bound_covering(0.9), None);
    }
}
