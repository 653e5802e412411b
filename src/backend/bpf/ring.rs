//! BPF ring buffers, read through mappings made as records arrive.
//! libbpf maps all of a ring's data, twice over, when a reader starts, and
//! the kernel inserts every page there and then: for the three rings of a
//! set, the most CPU a short command's run spends (docs/overhead.md).
//! Here a ring's data is an address range reserved whole and mapped a
//! chunk at a time, when a record first lies in it; a chunk stays mapped.
//! The records are read as libbpf's ringbuf.c reads them: a header of
//! length and flags, then the record, 8-byte aligned.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use libbpf_rs::{MapCore, MapHandle};

use crate::backend::perf;
use crate::error::{Error, Result};

/// A record's header: its length, and these two flags in the top bits.
const BUSY: u32 = 1 << 31;
const DISCARD: u32 = 1 << 30;
const HEADER: u64 = 8;

/// How much of a ring's data one mapping covers, at most: more than the
/// largest record (a stack sample), so a record spans two chunks at most.
const CHUNK: usize = 64 << 10;

/// Rings read together, with one epoll descriptor for their wake-ups.
pub struct Rings {
    epoll: OwnedFd,
    rings: Vec<Ring>,
}

impl Rings {
    /// Maps the positions of each of `maps` (BPF_MAP_TYPE_RINGBUF) and
    /// reserves room for their data; nothing of the data is mapped yet.
    pub fn new(maps: &[&MapHandle]) -> Result<Rings> {
        // SAFETY: a new descriptor, owned at once.
        let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epoll < 0 {
            return Err(os_error("epoll_create1"));
        }
        let epoll = unsafe { OwnedFd::from_raw_fd(epoll) };
        let mut rings = Vec::new();
        for (i, map) in maps.iter().enumerate() {
            let ring = Ring::map(map)?;
            let mut event = libc::epoll_event { events: libc::EPOLLIN as u32, u64: i as u64 };
            // SAFETY: both descriptors are alive; the event is read at the call.
            if unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, map.as_fd().as_raw_fd(), &mut event) } != 0 {
                return Err(os_error("epoll_ctl"));
            }
            rings.push(ring);
        }
        Ok(Rings { epoll, rings })
    }

    /// Ready when a ring has records whose sending asked for a wake-up.
    pub fn epoll_fd(&self) -> BorrowedFd<'_> {
        self.epoll.as_fd()
    }

    /// Hands each committed record of every ring to `each` with its ring's
    /// index, in order within a ring; returns how many. Records past a
    /// busy one (reserved, not yet committed) wait for the next call.
    pub fn consume(&mut self, mut each: impl FnMut(usize, &[u8])) -> Result<usize> {
        let mut n = 0;
        for (i, ring) in self.rings.iter_mut().enumerate() {
            n += ring.consume(&mut |data| each(i, data))?;
        }
        Ok(n)
    }
}

/// Where a ring's pieces are, and which chunks of its data are mapped.
struct Ring {
    fd: OwnedFd,
    /// The data's size: a power of two.
    size: u64,
    /// Read-write: the kernel reads it to know what is free.
    consumer: *mut u8,
    producer: *const u8,
    /// Twice `size` reserved: the kernel maps the data twice in a row, so
    /// a record that wraps reads on into the second copy.
    data: *mut u8,
    chunk: usize,
    mapped: Vec<bool>,
    page: usize,
}

impl Ring {
    fn map(map: &MapHandle) -> Result<Ring> {
        let name = map.name().to_string_lossy().into_owned();
        let fd = map.as_fd().try_clone_to_owned().map_err(|e| Error::Bpf(format!("ring {name}: {e}")))?;
        Ring::over(fd, map.max_entries() as usize, &name)
    }

    /// The ring whose pages `fd` maps as the kernel lays them out: the
    /// consumer's page, the producer's, then the data twice.
    fn over(fd: OwnedFd, size: usize, name: &str) -> Result<Ring> {
        let page = perf::page_size();
        if !size.is_power_of_two() || size < page {
            return Err(Error::Bpf(format!("ring {name}: {size} bytes is not a ring's size")));
        }
        let shared = |len: usize, prot: i32, offset: usize| {
            // SAFETY: a new shared mapping of the ring's own pages.
            let at = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd.as_raw_fd(), offset as libc::off_t) };
            if at == libc::MAP_FAILED {
                return Err(Error::Bpf(format!("mapping ring {name}: {}", std::io::Error::last_os_error())));
            }
            Ok(at.cast::<u8>())
        };
        let consumer = shared(page, libc::PROT_READ | libc::PROT_WRITE, 0)?;
        let producer = shared(page, libc::PROT_READ, page)?;
        // SAFETY: a new reservation, no access until chunks replace it.
        let data = unsafe {
            libc::mmap(std::ptr::null_mut(), 2 * size, libc::PROT_NONE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE, -1, 0)
        };
        if data == libc::MAP_FAILED {
            return Err(Error::Bpf(format!("reserving ring {name}: {}", std::io::Error::last_os_error())));
        }
        let chunk = CHUNK.clamp(page, size);
        Ok(Ring { fd, size: size as u64, consumer, producer, data: data.cast(), chunk, mapped: vec![false; 2 * size / chunk], page })
    }

    /// Maps the chunks that bytes `at..at + len` of the data lie in.
    fn reach(&mut self, at: u64, len: u64) -> Result<()> {
        let (first, last) = ((at as usize) / self.chunk, ((at + len.max(1) - 1) as usize) / self.chunk);
        for k in first..=last.min(self.mapped.len() - 1) {
            if self.mapped[k] {
                continue;
            }
            let offset = 2 * self.page + k * self.chunk;
            // SAFETY: replaces part of our own reservation with the ring's
            // pages at that offset, read-only.
            let at = unsafe {
                libc::mmap(
                    self.data.add(k * self.chunk).cast(),
                    self.chunk,
                    libc::PROT_READ,
                    libc::MAP_SHARED | libc::MAP_FIXED,
                    self.fd.as_raw_fd(),
                    offset as libc::off_t,
                )
            };
            if at == libc::MAP_FAILED {
                return Err(os_error("mapping a ring's data"));
            }
            self.mapped[k] = true;
        }
        Ok(())
    }

    fn consume(&mut self, each: &mut dyn FnMut(&[u8])) -> Result<usize> {
        // SAFETY (the atomics): page-aligned u64 positions in our mappings,
        // which the kernel updates atomically.
        let consumer = unsafe { &*self.consumer.cast::<AtomicU64>() };
        let producer = unsafe { &*self.producer.cast::<AtomicU64>() };
        let mask = self.size - 1;
        let mut n = 0;
        let mut cons = consumer.load(Ordering::Acquire);
        loop {
            let prod = producer.load(Ordering::Acquire);
            let mut got_new = false;
            while cons < prod {
                let at = cons & mask;
                self.reach(at, HEADER)?;
                // SAFETY: the header is mapped (above), 8-byte aligned.
                let header = unsafe { &*self.data.add(at as usize).cast::<AtomicU32>() };
                let len = header.load(Ordering::Acquire);
                if len & BUSY != 0 {
                    return Ok(n);
                }
                got_new = true;
                let body = u64::from(len & !(BUSY | DISCARD));
                if len & DISCARD == 0 {
                    self.reach(at + HEADER, body)?;
                    // SAFETY: committed bytes in mapped chunks, contiguous
                    // across the wrap (the second copy).
                    let record = unsafe { std::slice::from_raw_parts(self.data.add((at + HEADER) as usize), body as usize) };
                    each(record);
                    n += 1;
                }
                cons += (body + HEADER).div_ceil(8) * 8;
                consumer.store(cons, Ordering::Release);
            }
            if !got_new {
                return Ok(n);
            }
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: our own mappings, of these lengths.
        unsafe {
            libc::munmap(self.data.cast(), 2 * self.size as usize);
            libc::munmap(self.producer as *mut libc::c_void, self.page);
            libc::munmap(self.consumer.cast(), self.page);
        }
    }
}

fn os_error(what: &str) -> Error {
    Error::Bpf(format!("{what}: {}", std::io::Error::last_os_error()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file laid out as a ring's pages: records are written into both
    /// copies of the data, as the kernel's double mapping shows them.
    struct Fake {
        file: std::fs::File,
        size: u64,
        page: u64,
    }

    impl Fake {
        fn new(size: u64) -> Fake {
            let page = perf::page_size() as u64;
            // SAFETY: a new descriptor, owned at once.
            let fd = unsafe { libc::memfd_create(c"ring".as_ptr(), libc::MFD_CLOEXEC) };
            assert!(fd >= 0);
            let file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
            file.set_len(2 * page + 2 * size).unwrap();
            Fake { file, size, page }
        }

        fn write(&self, at: u64, bytes: &[u8]) {
            use std::os::unix::fs::FileExt;
            for (i, b) in bytes.iter().enumerate() {
                let off = (at + i as u64) % self.size;
                self.file.write_all_at(&[*b], 2 * self.page + off).unwrap();
                self.file.write_all_at(&[*b], 2 * self.page + self.size + off).unwrap();
            }
        }

        fn positions(&self, consumer: u64, producer: u64) {
            use std::os::unix::fs::FileExt;
            self.file.write_all_at(&consumer.to_ne_bytes(), 0).unwrap();
            self.file.write_all_at(&producer.to_ne_bytes(), self.page).unwrap();
        }

        /// A record at `at`: its header, then `body`; where the next one starts.
        fn record(&self, at: u64, flags: u32, body: &[u8]) -> u64 {
            self.write(at, &(body.len() as u32 | flags).to_ne_bytes());
            self.write(at + 4, &0u32.to_ne_bytes());
            self.write(at + HEADER, body);
            at + (body.len() as u64 + HEADER).div_ceil(8) * 8
        }

        fn ring(&self) -> Ring {
            Ring::over(OwnedFd::from(self.file.try_clone().unwrap()), self.size as usize, "fake").unwrap()
        }
    }

    fn consumed(ring: &mut Ring) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        ring.consume(&mut |r| got.push(r.to_vec())).unwrap();
        got
    }

    #[test]
    fn reads_committed_records_across_the_wrap_and_maps_only_their_chunks() {
        let size = 4 * CHUNK as u64;
        let fake = Fake::new(size);
        // Positions count on across laps: this is the third.
        let start = 2 * size + size - 16;
        let wrapping: Vec<u8> = (0..40).collect();
        let next = fake.record(start, 0, &wrapping);
        let next = fake.record(next, DISCARD, b"dropped");
        let busy_at = next;
        let end = fake.record(busy_at, BUSY, b"later");
        fake.positions(start, end);
        let mut ring = fake.ring();
        assert_eq!(consumed(&mut ring), [wrapping]);
        // The wrapped record's chunks (the data's last, its second copy's
        // first) and the data's first, where the next records are.
        let chunks = ring.mapped.len();
        assert_eq!(ring.mapped.iter().filter(|&&m| m).count(), 3, "{:?}", ring.mapped);
        assert!(ring.mapped[chunks / 2 - 1] && ring.mapped[chunks / 2]);
        // The consumer stands at the busy record, which comes once committed.
        // SAFETY: our mapping of the consumer's page.
        assert_eq!(unsafe { *ring.consumer.cast::<u64>() }, busy_at);
        assert!(consumed(&mut ring).is_empty());
        fake.record(busy_at, 0, b"later");
        assert_eq!(consumed(&mut ring), [b"later".to_vec()]);
        assert!(consumed(&mut ring).is_empty());
    }

    #[test]
    fn a_chunk_that_cannot_be_mapped_is_an_error_and_its_record_stays() {
        let size = 4 * CHUNK as u64;
        let fake = Fake::new(size);
        let end = fake.record(0, 0, b"unmapped");
        fake.positions(0, end);
        let mut ring = fake.ring();
        // The data's descriptor, write-only: no read mapping of it.
        let path = format!("/proc/self/fd/{}", fake.file.as_raw_fd());
        ring.fd = OwnedFd::from(std::fs::OpenOptions::new().write(true).open(path).unwrap());
        assert!(ring.consume(&mut |_| panic!("nothing is read")).is_err());
        // SAFETY: our mapping of the consumer's page.
        assert_eq!(unsafe { *ring.consumer.cast::<u64>() }, 0);
    }

    #[test]
    fn a_size_that_is_no_rings_is_refused() {
        let fake = Fake::new(3 * perf::page_size() as u64);
        let fd = OwnedFd::from(fake.file.try_clone().unwrap());
        assert!(Ring::over(fd, 3 * perf::page_size(), "odd").is_err());
    }
}
