//! The calls a repeated key counted in its first_calls word rather than in
//! its arg_stats entry (arguments.bpf.h, `count_in_word`: a walk's names,
//! back after many others, cost no table lookup). An entry that says so
//! (`counting`) names the word; its calls there are added wherever the
//! entry is read: at the read-out, and when an ended process is swept.

use libbpf_rs::{MapCore, MapFlags};

use super::skel::types::{arg_val, first_word};
use crate::error::{Error, Result};

/// Entries that count in their word, beyond which the array's pages that
/// hold their words are mapped rather than read a word per syscall.
const LOOKUPS_AT_MOST: usize = 64;

/// Pages apart that one mapping still spans: a mapping costs a few
/// microseconds, each page in it a fraction of one.
const GAP_PAGES: usize = 16;

/// Mappings at most; past them the whole array is mapped at once (8 MiB:
/// about a millisecond to map and unmap here).
const SPANS_AT_MOST: usize = 64;

/// Reads first_calls' words, each by a lookup, or through the mappings of
/// the pages that hold them.
pub struct WordCounts<'m> {
    map: &'m dyn MapCore,
    mapped: Option<Vec<Mapped>>,
}

/// Words `first..first + len` of the array, mapped read-only; unmapped
/// when dropped.
struct Mapped {
    first: usize,
    words: *const u64,
    len: usize,
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map_span`, `len` words long.
        unsafe { libc::munmap(self.words as *mut libc::c_void, self.len * 8) };
    }
}

impl<'m> WordCounts<'m> {
    /// For reading `entries` (those of them that count in a word decide
    /// how the words are read).
    pub fn new<'a>(map: &'m dyn MapCore, entries: impl Iterator<Item = &'a arg_val>) -> WordCounts<'m> {
        let slots: Vec<usize> = entries.filter(|v| v.counting != 0).map(|v| v.first_slot as usize).collect();
        let mapped = (slots.len() > LOOKUPS_AT_MOST).then(|| map_words(map, slots)).flatten();
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
        let slot = v.first_slot as usize;
        let word = match &self.mapped {
            Some(spans) => {
                let i = spans.partition_point(|m| m.first <= slot);
                match i.checked_sub(1).map(|i| &spans[i]) {
                    // SAFETY: within the mapping; the programs write words with
                    // atomics, and counting has stopped or the key's process ended.
                    Some(m) if slot < m.first + m.len => unsafe { m.words.add(slot - m.first).read_volatile() },
                    _ => return Err(unread()),
                }
            }
            None => match self.map.lookup(&v.first_slot.to_ne_bytes(), MapFlags::ANY) {
                Ok(Some(bytes)) => u64::from_ne_bytes(bytes.try_into().map_err(|_| unread())?),
                _ => return Err(unread()),
            },
        };
        Ok(counts_of_word(word))
    }
}

/// `v` with the calls and errors of its word, read elsewhere (copy_logged
/// copies them for the read-out), added; it then names no word to read.
pub fn add_word(v: &mut arg_val, word: u64) {
    let (calls, errors) = counts_of_word(word);
    v.calls += calls;
    v.errors += errors;
    v.counting = 0;
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

/// Maps the pages that hold `slots`' words: nearby pages together, the
/// whole array when they are spread too widely. None if a mapping fails
/// (the words are then read by lookups).
fn map_words(map: &dyn MapCore, slots: Vec<usize>) -> Option<Vec<Mapped>> {
    if map.value_size() != 8 {
        return None;
    }
    // SAFETY: sysconf has no preconditions.
    let page_words = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()? / 8;
    let len = map.max_entries() as usize;
    let mut spans = page_spans(slots, page_words, len);
    if spans.len() > SPANS_AT_MOST {
        spans = vec![(0, len)];
    }
    spans.into_iter().map(|(first, end)| map_span(map, first, end - first)).collect()
}

/// The word ranges, page-aligned, that cover `slots` in an array of `len`
/// words: pages within GAP_PAGES of each other share one, in order.
fn page_spans(mut slots: Vec<usize>, page_words: usize, len: usize) -> Vec<(usize, usize)> {
    slots.sort_unstable();
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for slot in slots.into_iter().filter(|&s| s < len) {
        let page = slot / page_words * page_words;
        let end = (page + page_words).min(len);
        match spans.last_mut() {
            Some(last) if page <= last.1 + GAP_PAGES * page_words => last.1 = last.1.max(end),
            _ => spans.push((page, end)),
        }
    }
    spans
}

fn map_span(map: &dyn MapCore, first: usize, len: usize) -> Option<Mapped> {
    use std::os::fd::AsRawFd;
    let offset = libc::off_t::try_from(first * 8).ok()?;
    // SAFETY: a new read-only shared mapping of the array's values (the map
    // is BPF_F_MMAPABLE) from a page-aligned offset, unmapped by Mapped's drop.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len * 8, libc::PROT_READ, libc::MAP_SHARED, map.as_fd().as_raw_fd(), offset) };
    (p != libc::MAP_FAILED).then(|| Mapped { first, words: p.cast(), len })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearby_pages_share_a_mapping_and_far_ones_do_not() {
        // 512 words a page, an array of 16 pages.
        assert_eq!(page_spans(vec![700, 5, 513], 512, 8192), vec![(0, 1024)]);
        assert_eq!(page_spans(vec![0, 512 * 16], 512, 512 * 40), vec![(0, 512 * 17)], "16 pages apart: one span");
        assert_eq!(page_spans(vec![0, 512 * 18], 512, 512 * 40), vec![(0, 512), (512 * 18, 512 * 19)]);
        assert_eq!(page_spans(vec![8191, 9000], 512, 8192), vec![(7680, 8192)], "past the array: left out");
        assert!(page_spans(vec![], 512, 8192).is_empty());
        // Slots over many far pages, each its own span (more than
        // SPANS_AT_MOST of them map the whole array instead).
        let far: Vec<usize> = (0..100).map(|i| i * 512 * 20).collect();
        assert_eq!(page_spans(far, 512, 512 * 20 * 100).len(), 100);
    }

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
