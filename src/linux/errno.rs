//! errno numbers to names, as strace prints them (x86_64 Linux; the names
//! come from the `syscalls` crate, the kernel-internal ones included).

/// `ENOENT` for 2; `E1234` for a number without a name.
pub fn name(errno: u32) -> String {
    i32::try_from(errno).ok().and_then(|n| syscalls::Errno::new(n).name()).map_or_else(|| format!("E{errno}"), str::to_string)
}

#[cfg(test)]
mod tests {
    #[test]
    fn names() {
        assert_eq!(super::name(2), "ENOENT");
        assert_eq!(super::name(25), "ENOTTY");
        assert_eq!(super::name(11), "EAGAIN");
        assert_eq!(super::name(35), "EDEADLK");
        assert_eq!(super::name(512), "ERESTARTSYS");
        assert_eq!(super::name(9999), "E9999");
    }
}
