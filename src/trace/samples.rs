//! Stack samples as the kernel side sends them (struct stack_sample in
//! syscount.h): the user registers at a syscall and the top of the stack.

use std::mem::offset_of;

use super::bpf::skel::types::stack_sample;

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

fn field<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at + N)?.try_into().ok()
}

impl StackSample {
    /// Parses one ring-buffer record; None if it is shorter than its header
    /// says (which the kernel never writes).
    pub fn parse(b: &[u8]) -> Option<StackSample> {
        let u32_at = |at| field::<4>(b, at).map(u32::from_ne_bytes);
        let u64_at = |at| field::<8>(b, at).map(u64::from_ne_bytes);
        let len = u32_at(offset_of!(stack_sample, stack_len))? as usize;
        let stack_at = offset_of!(stack_sample, stack);
        Some(StackSample {
            tgid: u32_at(offset_of!(stack_sample, tgid))?,
            tid: u32_at(offset_of!(stack_sample, tid))?,
            nr: u32_at(offset_of!(stack_sample, nr))?,
            period: u64_at(offset_of!(stack_sample, period))?,
            ns: u64_at(offset_of!(stack_sample, ns))?,
            time_ns: u64_at(offset_of!(stack_sample, time_ns))?,
            fd: u64_at(offset_of!(stack_sample, fd))? as i64,
            path_hash: u64_at(offset_of!(stack_sample, path_hash))?,
            ip: u64_at(offset_of!(stack_sample, ip))?,
            sp: u64_at(offset_of!(stack_sample, sp))?,
            fp: u64_at(offset_of!(stack_sample, fp))?,
            lr: u64_at(offset_of!(stack_sample, lr))?,
            stack: b.get(stack_at..stack_at + len)?.to_vec(),
        })
    }

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
    fn parses_a_record() {
        let mut b = vec![0u8; offset_of!(stack_sample, stack) + 16];
        let put = |b: &mut Vec<u8>, at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
        put(&mut b, offset_of!(stack_sample, tgid), &7u32.to_ne_bytes());
        put(&mut b, offset_of!(stack_sample, nr), &262u32.to_ne_bytes());
        put(&mut b, offset_of!(stack_sample, period), &64u64.to_ne_bytes());
        put(&mut b, offset_of!(stack_sample, sp), &0x1000u64.to_ne_bytes());
        put(&mut b, offset_of!(stack_sample, stack_len), &16u32.to_ne_bytes());
        let at = offset_of!(stack_sample, stack) + 8;
        put(&mut b, at, &0xdeadu64.to_ne_bytes());
        let s = StackSample::parse(&b).unwrap();
        assert_eq!((s.tgid, s.nr, s.period, s.stack.len()), (7, 262, 64, 16));
        assert_eq!(s.read_u64(0x1008), Some(0xdead));
        assert_eq!(s.read_u64(0x1009), None);
        assert_eq!(s.read_u64(0xff8), None);
        // Cut short: refused.
        assert!(StackSample::parse(&b[..b.len() - 1]).is_none());
    }
}
