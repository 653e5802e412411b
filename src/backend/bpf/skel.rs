//! The skeleton bpftool generated from syscount.bpf.c (build.rs): the
//! programs, the maps, and the kernel side's types, which the files above
//! turn into sysdiet's own once, where they are read.

include!(concat!(env!("OUT_DIR"), "/syscount.skel.rs"));

/// The object the skeleton embeds, as a file's bytes (for kernel_types).
pub const OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/syscount.bpf.o"));

/// The length of an array in a generated type, for sizes the kernel side
/// decides (no hand copy of its constants).
pub const fn array_len<T, const N: usize>(_: &[T; N]) -> usize {
    N
}

// The user side's tables are as long as the kernel side's.
// SAFETY: the read-only data is plain integers, for which zero is valid.
const _: () = assert!(array_len(&unsafe { std::mem::zeroed::<types::rodata>() }.specs) == crate::linux::syscalls::MAX_SYSCALLS);

#[cfg(test)]
mod tests {
    #[test]
    fn the_model_keeps_as_many_byte_buckets_as_the_kernel_side() {
        // The model sits below the tracer and cannot read the skeleton.
        assert_eq!(crate::model::Histogram::BUCKETS, super::types::arg_slot::default().requested.len());
    }
}
