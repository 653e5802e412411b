//! Which frame of a stack is the code that did the work: the first one,
//! from the syscall outward, that is not the C or C++ runtime (libc, ld.so,
//! libpthread, libstdc++; see `Frame::in_c_runtime`), not the vDSO, and
//! not a language runtime's dispatch machinery (an interpreter's eval loop
//! and call paths, Rust's std, Go's standard library and runtime). Any other library is code someone wrote on
//! purpose: an interpreter's `Perl_pp_gmtime` or `time_localtime`, a
//! program's plugin, libsqlite3's commit. That frame made the decision to
//! call; the frames inside it are how.

use crate::model::Frame;

/// Functions that are machinery wherever they are linked: Rust's std and
/// core, a static glibc, and interpreters' dispatch loops and call paths
/// (CPython, Perl, Ruby), which sit between the interpreted code and the
/// native function that did the work.
const MACHINERY_PREFIXES: &[&str] = &[
    "std::",
    "core::",
    "alloc::",
    "<std::",
    "<core::",
    "<alloc::",
    "__libc_",
    "_IO_",
    "__GI_",
    "_dl_",
    // CPython
    "_PyEval_",
    "PyEval_",
    "_PyObject_Call",
    "PyObject_Call",
    "_PyObject_Vectorcall",
    "PyObject_Vectorcall",
    "_PyObject_MakeTpCall",
    "_PyFunction_Vectorcall",
    "PyVectorcall_",
    "cfunction_",
    "method_vectorcall",
    "_PyRun_",
    "PyRun_",
    "Py_RunMain",
    "Py_BytesMain",
    "pymain_",
    // Perl
    "Perl_runops_",
    "perl_run",
    "S_run_body",
    "Perl_call_",
    "Perl_pp_entersub",
    // Ruby
    "rb_vm_exec",
    "vm_exec",
    "vm_call",
    "vm_sendish",
    "rb_funcall",
    "rb_ec_exec_node",
    "ruby_run_node",
];

/// The responsible frame, and how many frames from it outward are the
/// program's own.
pub fn responsible(frames: &[Frame]) -> Option<(usize, usize)> {
    responsible_of(&frames.iter().map(is_machinery).collect::<Vec<_>>())
}

/// The same, from whether each frame is machinery (`is_machinery`), for
/// stacks whose frames were judged once each.
pub fn responsible_of(machinery: &[bool]) -> Option<(usize, usize)> {
    let first = machinery.iter().position(|m| !m)?;
    let own = machinery[first..].iter().take_while(|m| !**m).count();
    Some((first, own))
}

pub fn is_machinery(f: &Frame) -> bool {
    if f.in_c_runtime() || in_go_library(f) {
        return true;
    }
    match &f.function {
        Some(name) => MACHINERY_PREFIXES.iter().any(|p| name.starts_with(p)),
        // Code in no known file (JIT, or lost): not ours to blame.
        None => f.module == "?",
    }
}

/// Go's standard library and runtime, linked into every Go program: its
/// functions are named by package path (`os.Stat`, `internal/poll.(*FD).Read`,
/// `runtime.main`), told from a module's (`github.com/you/app.Load`, whose
/// path's first element has a dot) and the program's own (`main.main`).
/// golang.org/x/sys's syscall wrappers count with them, as libc's do. Only
/// frames of Go source or Go assembly: a C function's name has no package.
fn in_go_library(f: &Frame) -> bool {
    let go_source = f.file.as_deref().is_some_and(|file| file.ends_with(".go") || file.ends_with(".s"));
    let Some(name) = f.function.as_deref().filter(|_| go_source) else { return false };
    // A generic function's type arguments may hold package paths too.
    let name = name.split('[').next().unwrap_or(name);
    let last_element = name.rfind('/').map_or(0, |i| i + 1);
    let Some(dot) = name[last_element..].find('.') else { return false };
    let package = &name[..last_element + dot];
    let first_element = package.split('/').next().unwrap_or(package);
    (!first_element.contains('.') && package != "main") || package.starts_with("golang.org/x/sys/")
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
    }

    #[test]
    fn an_interpreters_native_function_is_named_not_its_loop() {
        // perl -e 'localtime($_) for 1..N': the op that did the work.
        let libperl = "/usr/lib/x86_64-linux-gnu/libperl.so.5.36";
        let stack = [
            f("__tzfile_read", LIBC),
            f("__tz_convert", LIBC),
            f("Perl_pp_gmtime", libperl),
            f("Perl_runops_standard", libperl),
            f("perl_run", libperl),
            f("main", "/usr/bin/perl"),
        ];
        assert_eq!(responsible(&stack), Some((2, 1)));
        // A library's own logic (sqlite's commit) is code too; libstdc++ is not.
        let sqlite = "/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6";
        let stack = [f("fdatasync", LIBC), f("sqlite3PagerCommitPhaseOne", sqlite), f("sqlite3_step", sqlite), f("main", "/usr/bin/sqlite3")];
        assert_eq!(responsible(&stack), Some((1, 3)));
        let cpp = [f("open", LIBC), f("std::basic_filebuf::open", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"), f("load", "/srv/app")];
        assert_eq!(responsible(&cpp), Some((2, 1)));
    }

    fn go(function: &str, file: &str) -> Frame {
        Frame { function: Some(function.into()), file: Some(file.into()), line: Some(1), module: "/srv/gostat".into(), ..Default::default() }
    }

    #[test]
    fn gos_standard_library_is_skipped_for_the_programs_code() {
        // os.Stat in a loop of main.main: a static Go binary, no libc.
        let stack = [
            go("internal/runtime/syscall/linux.Syscall6", "asm_linux_amd64.s"),
            go("syscall.Syscall6", "syscall_linux.go"),
            go("syscall.fstatat", "zsyscall_linux_amd64.go"),
            go("os.statNolog", "stat_unix.go"),
            go("os.Stat", "stat.go"),
            go("main.main.func1", "main.go"),
            go("main.main", "main.go"),
            go("runtime.main", "proc.go"),
            go("runtime.goexit", "asm_amd64.s"),
        ];
        assert_eq!(responsible(&stack), Some((5, 2)));
        // A module's code is someone's, its syscall wrappers are not.
        let stack = [
            go("golang.org/x/sys/unix.Syscall", "syscall_linux.go"),
            go("golang.org/x/sys/unix.Fsync", "zsyscall_linux.go"),
            go("github.com/you/store.(*Log).Append", "log.go"),
            go("net/http.HandlerFunc.ServeHTTP", "server.go"),
            go("slices.SortFunc[go.shape.*github.com/you/store.Entry]", "sort.go"),
        ];
        assert_eq!(responsible(&stack), Some((2, 1)));
        // A C function cloned by the compiler has a dot, and no Go source.
        assert_eq!(responsible(&[f("use_localtime.constprop.0", "/tmp/timeloop")]), Some((0, 1)));
        assert_eq!(responsible(&[go("use_localtime.constprop.0", "timeloop.c")]), Some((0, 1)));
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
