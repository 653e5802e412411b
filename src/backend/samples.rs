//! A stack sample, as either tracer takes it (BPF's ring in
//! bpf/records.rs, ptrace from the stopped thread): the user registers at a
//! syscall and the top of the stack.

#[derive(Debug, Clone)]
pub struct StackSample {
    pub tgid: u32,
    pub tid: u32,
    pub nr: u32,
    /// Calls this sample stands for: its thread's since the previous one.
    pub period: u64,
    pub ns: u64,
    /// CLOCK_MONOTONIC at the call's exit.
    pub time_ns: u64,
    pub fd: i64,
    pub path_hash: u64,
    pub ip: u64,
    pub sp: u64,
    /// The frame pointer (rbp, x29).
    pub fp: u64,
    /// The link register (x30 on arm64; 0 on x86-64).
    pub lr: u64,
    /// The stack from `sp` upward.
    pub stack: Vec<u8>,
}

pub(crate) fn field<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at + N)?.try_into().ok()
}

impl StackSample {
    /// The 8 bytes at `addr` if the copy holds them.
    pub fn read_u64(&self, addr: u64) -> Option<u64> {
        let off = usize::try_from(addr.checked_sub(self.sp)?).ok()?;
        field::<8>(&self.stack, off).map(u64::from_ne_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_what_the_copy_holds() {
        let mut stack = vec![0u8; 16];
        stack[8..].copy_from_slice(&0xdeadu64.to_ne_bytes());
        let s = StackSample { tgid: 7, tid: 7, nr: 0, period: 1, ns: 0, time_ns: 0, fd: 0, path_hash: 0, ip: 0, sp: 0x1000, fp: 0, lr: 0, stack };
        assert_eq!(s.read_u64(0x1008), Some(0xdead));
        assert_eq!(s.read_u64(0x1009), None);
        assert_eq!(s.read_u64(0xff8), None);
    }
}
