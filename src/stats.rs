//! Statistics for timings: summaries, outliers (modified z-score, as
//! Iglewicz and Hoaglin), and a bootstrap confidence interval for the ratio
//! of two medians.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Summary {
    pub median: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub stddev: f64,
}

pub fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub fn summarize(xs: &[f64]) -> Summary {
    let n = xs.len().max(1) as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = if xs.len() > 1 { xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    Summary {
        median: median(xs),
        mean,
        min: xs.iter().copied().fold(f64::INFINITY, f64::min),
        max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        stddev: var.sqrt(),
    }
}

/// How many robust standard deviations (1.4826 × MAD) above the median a
/// run must be to count as an outlier: hyperfine's threshold. A tighter
/// one flags ordinary jitter on a busy machine.
const OUTLIER_SIGMAS: f64 = 10.0;

/// Indices of runs far slower than the others (only slower: a fast run
/// is not a disturbance).
pub fn outliers(xs: &[f64]) -> Vec<usize> {
    let m = median(xs);
    let deviations: Vec<f64> = xs.iter().map(|x| (x - m).abs()).collect();
    let sigma = 1.4826 * median(&deviations);
    if sigma == 0.0 {
        return Vec::new();
    }
    xs.iter().enumerate().filter(|(_, x)| (*x - m) / sigma > OUTLIER_SIGMAS).map(|(i, _)| i).collect()
}

/// A small deterministic generator (xorshift64*): the same runs give the
/// same interval.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
}

/// The ratio median(b) / median(a) and its 95% bootstrap percentile
/// interval (resampling both sets, 2,000 times).
pub fn ratio_interval(a: &[f64], b: &[f64]) -> (f64, f64, f64) {
    let ratio = median(b) / median(a);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut ratios: Vec<f64> = (0..2000)
        .map(|_| {
            let ra: Vec<f64> = (0..a.len()).map(|_| a[rng.below(a.len())]).collect();
            let rb: Vec<f64> = (0..b.len()).map(|_| b[rng.below(b.len())]).collect();
            median(&rb) / median(&ra)
        })
        .filter(|r| r.is_finite())
        .collect();
    ratios.sort_by(f64::total_cmp);
    if ratios.is_empty() {
        return (ratio, ratio, ratio);
    }
    let at = |q: f64| ratios[((ratios.len() - 1) as f64 * q).round() as usize];
    (ratio, at(0.025), at(0.975))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries() {
        let s = summarize(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!((s.median, s.mean, s.min, s.max), (2.5, 2.5, 1.0, 4.0));
        assert!((s.stddev - 1.29).abs() < 0.01);
    }

    #[test]
    fn an_outlier_is_flagged() {
        assert_eq!(outliers(&[1.0, 1.01, 0.99, 1.02, 0.98, 3.0]), vec![5]);
        assert!(outliers(&[1.0, 1.0, 1.0]).is_empty());
    }

    #[test]
    fn fast_runs_and_jitter_are_no_outliers() {
        // The fastest run, far below the rest: not a busy moment.
        assert!(outliers(&[1.0, 1.01, 0.99, 1.02, 0.98, 0.3]).is_empty());
        // 1.15 is 7.5 robust sigmas up: jitter, under hyperfine's 10.
        assert!(outliers(&[1.0, 1.01, 0.99, 1.02, 0.98, 1.15]).is_empty());
    }

    #[test]
    fn a_clear_difference_excludes_one_and_equal_sets_include_it() {
        let a = [1.0, 1.02, 0.98, 1.01, 0.99, 1.0, 1.03, 0.97];
        let b: Vec<f64> = a.iter().map(|x| x * 0.5).collect();
        let (r, lo, hi) = ratio_interval(&a, &b);
        assert!((r - 0.5).abs() < 1e-9 && hi < 1.0 && lo > 0.4);
        let (_, lo, hi) = ratio_interval(&a, &a);
        assert!(lo <= 1.0 && hi >= 1.0);
    }
}
