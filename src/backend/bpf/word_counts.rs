//! The calls a repeated key counted in its first_calls word rather than in
//! its arg_stats entry (arguments.bpf.h, `count_in_word`: a walk's names,
//! back after many others, cost no table lookup). An entry that says so
//! (`counting`) names the word; its calls there are added wherever the
//! entry is read: at the read-out, and when an ended process is swept.

use libbpf_rs::{MapCore, MapFlags};

use super::skel::types::{arg_val, first_word};
use crate::error::{Error, Result};

/// Entries that count in their word, beyond which the array is mapped
/// once (8 MiB: about a millisecond) rather than read a word per syscall.
const LOOKUPS_AT_MOST: usize = 64;

/// Reads first_calls' words, each by a lookup, or all through one mapping.
pub struct WordCounts<'m> {
    map: &'m dyn MapCore,
    mapped: Option<Mapped>,
}

/// The array's values, mapped read-only; unmapped when dropped.
struct Mapped {
    words: *const u64,
    len: usize,
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `WordCounts::new`, `len` words long.
        unsafe { libc::munmap(self.words as *mut libc::c_void, self.len * 8) };
    }
}

impl<'m> WordCounts<'m> {
    /// For reading `entries` (those of them that count in a word decide
    /// how the words are read).
    pub fn new<'a>(map: &'m dyn MapCore, entries: impl Iterator<Item = &'a arg_val>) -> WordCounts<'m> {
        let counting = entries.filter(|v| v.counting != 0).count();
        let mapped = (counting > LOOKUPS_AT_MOST).then(|| map_words(map)).flatten();
        WordCounts { map, mapped }
    }

    /// `v` with the calls and errors its word holds added; an error if
    /// the word cannot be read (its calls would be lost unsaid).
    pub fn add_to(&self, v: &mut arg_val) -> Result<()> {
        let (calls, errors) = self.counts(v)?;
        v.calls += calls;
        v.errors += errors;
        Ok(())
    }

    /// The calls and errors `v`'s word holds beyond its entry's.
    fn counts(&self, v: &arg_val) -> Result<(u64, u64)> {
        if v.counting == 0 {
            return Ok((0, 0));
        }
        let unread = || Error::Bpf(format!("reading first_calls[{}], which an argument entry names", v.first_slot));
        let word = match &self.mapped {
            // SAFETY: within the mapping; the programs write words with
            // atomics, and counting has stopped or the key's process ended.
            Some(m) if (v.first_slot as usize) < m.len => unsafe { m.words.add(v.first_slot as usize).read_volatile() },
            Some(_) => return Err(unread()),
            None => match self.map.lookup(&v.first_slot.to_ne_bytes(), MapFlags::ANY) {
                Ok(Some(bytes)) => u64::from_ne_bytes(bytes.try_into().map_err(|_| unread())?),
                _ => return Err(unread()),
            },
        };
        Ok(counts_of_word(word))
    }
}

/// The calls and errors counted in a word: none unless it is a promoted
/// key's that counts.
fn counts_of_word(word: u64) -> (u64, u64) {
    let flags = first_word::FIRST_WORD_PROMOTED.0 as u64 | first_word::FIRST_WORD_COUNTING.0 as u64;
    if word & flags != flags {
        return (0, 0);
    }
    let calls = (word >> first_word::FIRST_WORD_CALLS_SHIFT.0) & first_word::FIRST_WORD_CALLS_MAX.0 as u64;
    (calls, word & first_word::FIRST_WORD_ERRORS_MAX.0 as u64)
}

fn map_words(map: &dyn MapCore) -> Option<Mapped> {
    use std::os::fd::AsRawFd;
    if map.value_size() != 8 {
        return None;
    }
    let len = map.max_entries() as usize;
    // SAFETY: a new read-only shared mapping of the array's values (the map
    // is BPF_F_MMAPABLE), unmapped by Mapped's drop.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len * 8, libc::PROT_READ, libc::MAP_SHARED, map.as_fd().as_raw_fd(), 0) };
    (p != libc::MAP_FAILED).then(|| Mapped { words: p.cast(), len })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_counting_promoted_word_holds_calls() {
        let promoted = first_word::FIRST_WORD_PROMOTED.0 as u64;
        let counting = first_word::FIRST_WORD_COUNTING.0 as u64;
        let fingerprint = 0xdead_beef_u64 << 32;
        let calls = |n: u64| n << first_word::FIRST_WORD_CALLS_SHIFT.0;
        assert_eq!(counts_of_word(fingerprint | promoted | counting | calls(4095) | 255), (4095, 255));
        assert_eq!(counts_of_word(fingerprint | promoted | counting), (0, 0));
        // Promoted, not counting yet: its bits are cleared facts.
        assert_eq!(counts_of_word(fingerprint | promoted | calls(7) | 3), (0, 0));
        // A first call's facts (FIRST_FAILED shares the counting bit).
        assert_eq!(counts_of_word(fingerprint | counting | calls(300) | 5), (0, 0));
        assert_eq!(counts_of_word(0), (0, 0));
    }
}
