//! Which frame of a stack is the program's own code: the first one, from
//! the syscall outward, that is not in a system library (libc, ld.so and
//! every other shared object the distribution installs), not in the vDSO,
//! and not a language runtime's own machinery that we recognise. That frame
//! made the decision to call; the frames inside it are how.

use crate::model::Frame;

/// Where a distribution installs shared libraries.
const SYSTEM_LIBRARY_DIRS: &[&str] = &["/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/", "/lib32/", "/usr/lib32/"];

/// Functions of language runtimes that may be linked into an executable
/// (CPython, Ruby, Perl, Rust's std and core, a static glibc).
const RUNTIME_PREFIXES: &[&str] =
    &["_Py", "rb_", "ruby_", "Perl_", "perl_", "std::", "core::", "alloc::", "<std::", "<core::", "<alloc::", "__libc_", "_IO_", "__GI_", "_dl_"];

/// The responsible frame, and how many frames from it outward are the
/// program's own.
pub fn responsible(frames: &[Frame]) -> Option<(usize, usize)> {
    let first = frames.iter().position(|f| !is_machinery(f))?;
    let own = frames[first..].iter().take_while(|f| !is_machinery(f)).count();
    Some((first, own))
}

fn is_machinery(f: &Frame) -> bool {
    if f.module == super::images::VDSO || is_system_library(&f.module) {
        return true;
    }
    match &f.function {
        Some(name) => RUNTIME_PREFIXES.iter().any(|p| name.starts_with(p)) || is_python_api(name),
        // Code in no known file (JIT, or lost): not ours to blame.
        None => f.module == "?",
    }
}

/// CPython's C API: `PyObject_Call`, `Py_RunMain`; not `Pythagoras`.
fn is_python_api(name: &str) -> bool {
    name.strip_prefix("Py").and_then(|r| r.chars().next()).is_some_and(|c| c == '_' || c.is_ascii_uppercase())
}

/// A shared object the distribution installs for everyone: one that sits
/// directly in a library directory (`/usr/lib/x86_64-linux-gnu/libc.so.6`).
/// One deeper down is a program's own plugin or an interpreter's extension
/// module (`/usr/lib/python3.11/lib-dynload/_ssl...so`, a shell's loadable
/// builtin under `/usr/lib/bash/`): the program's code, to be blamed.
fn is_system_library(path: &str) -> bool {
    let (dir, file) = path.rsplit_once('/').unwrap_or(("", path));
    let shared_object = file.contains(".so") || file.starts_with("ld-linux");
    let dir = format!("{dir}/");
    shared_object && SYSTEM_LIBRARY_DIRS.iter().any(|d| dir == *d || dir.strip_prefix(d).is_some_and(is_multiarch_dir))
}

/// `x86_64-linux-gnu/`, the multiarch directory inside a library directory.
fn is_multiarch_dir(rest: &str) -> bool {
    rest.strip_suffix('/').is_some_and(|d| !d.contains('/') && d.contains("-linux-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(function: &str, module: &str) -> Frame {
        Frame { function: Some(function.into()), module: module.into(), ..Default::default() }
    }

    const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";

    #[test]
    fn the_first_frame_outside_libc_is_blamed() {
        let stack = [f("__GI___fstatat64", LIBC), f("__tz_convert", LIBC), f("use_localtime", "/tmp/timeloop"), f("main", "/tmp/timeloop")];
        assert_eq!(responsible(&stack), Some((2, 2)));
    }

    #[test]
    fn a_library_outside_the_system_dirs_is_the_users() {
        let stack = [f("fsync", LIBC), f("flush_all", "/home/me/build/libmine.so"), f("main", "/home/me/build/app")];
        assert_eq!(responsible(&stack), Some((1, 2)));
    }

    #[test]
    fn runtimes_in_the_executable_are_skipped() {
        let stack = [
            f("__GI___fstatat64", LIBC),
            f("_PyEval_EvalFrameDefault", "/usr/bin/python3.11"),
            f("PyObject_Vectorcall", "/usr/bin/python3.11"),
            f("std::fs::metadata", "/srv/app"),
            f("app::load_config", "/srv/app"),
        ];
        assert_eq!(responsible(&stack), Some((4, 1)));
        assert_eq!(responsible(&[f("Pythagoras", "/srv/app")]), Some((0, 1)));
    }

    #[test]
    fn extension_modules_and_plugins_are_the_programs() {
        let ext = "/usr/lib/python3.11/lib-dynload/_ssl.cpython-311-x86_64-linux-gnu.so";
        let stack = [f("write", LIBC), f("_ssl__SSLSocket_write_impl", ext), f("_PyEval_EvalFrameDefault", "/usr/bin/python3.11")];
        assert_eq!(responsible(&stack), Some((1, 1)));
        let builtin = [f("stat", LIBC), f("finfo_main", "/usr/lib/bash/finfo"), f("main", "/usr/bin/bash")];
        assert_eq!(responsible(&builtin), Some((1, 2)));
        // A library straight in a library directory is the system's.
        for lib in ["/usr/lib/x86_64-linux-gnu/libsqlite3.so.0", "/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/libfoo.so"] {
            assert!(is_system_library(lib), "{lib}");
        }
        assert!(!is_system_library("/usr/lib/x86_64-linux-gnu/perl5/5.36/auto/POSIX/POSIX.so"));
    }

    #[test]
    fn nothing_of_ours_is_none() {
        let stack = [f("clock_gettime", "[vdso]"), f("__libc_start_main", LIBC)];
        assert_eq!(responsible(&stack), None);
    }

    #[test]
    fn an_executable_in_usr_lib_is_still_a_program() {
        // Not a shared object, so a program's own code.
        let stack = [f("write", LIBC), f("main", "/usr/lib/git-core/git"), f("__libc_start_call_main", LIBC)];
        assert_eq!(responsible(&stack), Some((1, 1)));
    }
}
