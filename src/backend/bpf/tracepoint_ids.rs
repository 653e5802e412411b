//! The BTF ids of the tracepoints the `tp_btf` programs attach to, kept per
//! kernel build. To load a `tp_btf` program, libbpf parses the kernel's
//! whole BTF (~6 MB, a few ms of every cold start: docs/overhead.md) only
//! to find one id per tracepoint, the same every time on one kernel. Found
//! once and kept in the cache, the ids are handed to the kernel by a libbpf
//! section handler of ours for `tp_btf`, which marks each program as not
//! needing the kernel's BTF and sets its id at load. The kernel checks the
//! id as it would libbpf's: the typedef `btf_trace_<tracepoint>` and its
//! prototype. The live threads' task iterator (`iter/task`, live.rs) is
//! handled alike, by the id of its function `bpf_iter_task`. Without a
//! kernel build id or a writable cache, the ids are found in this process
//! only; a target not among them is looked up when its program loads.

use std::collections::HashMap;
use std::ffi::{c_int, c_long, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// What sysdiet's programs attach to by BTF id: tracepoints by name, task
/// iterators as their section names them (a program of another is looked
/// up when it loads). Every kernel the BPF tracer loads on (5.8 and newer)
/// has them all.
const TARGETS: &[&str] = &[
    "sys_enter",
    "sys_exit",
    "sched_process_fork",
    "sched_process_exec",
    "sched_process_exit",
    "signal_deliver",
    "hrtimer_expire_entry",
    "iter/task",
];

/// What libbpf's `attach_prog_fd` holds for our programs until they load:
/// not 0, so that libbpf does not take them for programs that need the
/// kernel's BTF; replaced by 0 (the kernel's own BTF) at load.
const NOT_A_PROGRAM: c_int = c_int::MAX;

/// Tracepoint name -> BTF id, for this process.
static IDS: Mutex<Option<HashMap<String, u32>>> = Mutex::new(None);

/// Whether our handler is in place.
static INSTALLED: OnceLock<bool> = OnceLock::new();

/// Makes libbpf load every `tp_btf` and `iter` program opened from now on
/// with the ids kept for the running kernel, found now if none are kept:
/// true if the `tp_btf` handler is in place (once per process).
pub fn install() -> bool {
    *INSTALLED.get_or_init(|| {
        let kept = kept();
        let ids = match kept.as_deref().and_then(read_kept) {
            Some(ids) if TARGETS.iter().all(|t| ids.contains_key(*t)) => ids,
            _ => {
                let _t = crate::timings::span("find the attach targets' BTF ids");
                let Some(ids) = look_up(TARGETS) else { return false };
                if let Some(path) = &kept {
                    crate::linux::host::replace_file(path, |tmp| std::fs::write(tmp, to_text(&ids)).is_ok());
                }
                ids
            }
        };
        *IDS.lock().unwrap_or_else(|e| e.into_inner()) = Some(ids);
        register()
    })
}

/// `load` (an object opened and loaded), with our ids in place; once more
/// if the kernel refused it and its BTF says the kept ids were wrong.
pub fn loaded<T>(load: impl Fn() -> crate::error::Result<T>) -> crate::error::Result<T> {
    install();
    match load() {
        Err(_) if look_again() => load(),
        loaded => loaded,
    }
}

/// Whether `tp_btf` and `iter` programs opened now load with our ids.
pub fn installed() -> bool {
    INSTALLED.get().copied().unwrap_or(false)
}

/// Where the ids for the running kernel are kept, if it has a build id.
fn kept() -> Option<PathBuf> {
    crate::linux::host::cache_dir().zip(super::kernel_types::kernel_build_id()).map(|(dir, id)| kept_in(&dir, &id))
}

/// Where the ids for the kernel of build id `kernel` are kept.
fn kept_in(cache: &Path, kernel: &str) -> PathBuf {
    cache.join("btf").join(format!("{kernel}.tracepoints"))
}

/// Kept ids, if the file is ours alone and reads whole.
fn read_kept(path: &Path) -> Option<HashMap<String, u32>> {
    let text = std::io::read_to_string(crate::linux::host::open_own(path)?).ok()?;
    parse(&text)
}

/// "name id" lines; None if any line is not one.
fn parse(text: &str) -> Option<HashMap<String, u32>> {
    text.lines()
        .map(|line| {
            let (name, id) = line.split_once(' ')?;
            Some((name.to_string(), id.parse().ok().filter(|&id| id > 0)?))
        })
        .collect()
}

fn to_text(ids: &HashMap<String, u32>) -> String {
    let mut lines: Vec<String> = ids.iter().map(|(name, id)| format!("{name} {id}\n")).collect();
    lines.sort();
    lines.concat()
}

/// Whether the kernel's BTF types `tracepoint` for `tp_btf` programs
/// (Linux 5.5 and newer): yes if the ids kept for this kernel have it (not
/// when SYSDIET_KERNEL_BTF names another BTF), else as its BTF, parsed
/// now, says. None if that cannot be read.
pub fn typed(tracepoint: &str) -> Option<bool> {
    if !super::maps::kernel_btf_overridden() && kept().as_deref().and_then(read_kept).is_some_and(|ids| ids.contains_key(tracepoint)) {
        return Some(true);
    }
    with_kernel_btf(|btf| id_in(btf, tracepoint).is_some())
}

/// The ids of `tracepoints` in the kernel's BTF (the typedef libbpf finds
/// for `tp_btf`), parsed now; None if the BTF cannot be read or one is
/// missing.
fn look_up(tracepoints: &[&str]) -> Option<HashMap<String, u32>> {
    with_kernel_btf(|btf| tracepoints.iter().map(|t| Some((t.to_string(), id_in(btf, t)?))).collect()).flatten()
}

/// `f` of the kernel's BTF (SYSDIET_KERNEL_BTF's file when set, as
/// maps::kernel_btf_path), parsed now; None if it cannot be read.
fn with_kernel_btf<T>(f: impl FnOnce(*mut libbpf_sys::btf) -> T) -> Option<T> {
    super::maps::quiet_libbpf();
    let path = super::maps::kernel_btf_overridden().then(super::maps::kernel_btf_path);
    let path = match path.map(|p| CString::new(p.into_os_string().into_encoded_bytes())) {
        Some(Ok(p)) => Some(p),
        Some(Err(_)) => return None,
        None => None,
    };
    // SAFETY: libbpf returns a BTF object or an error pointer; a C string.
    let btf = unsafe {
        match &path {
            Some(p) => libbpf_sys::btf__parse(p.as_ptr(), std::ptr::null_mut()),
            None => libbpf_sys::btf__load_vmlinux_btf(),
        }
    };
    if btf.is_null() || unsafe { libbpf_sys::libbpf_get_error(btf as *const _) } != 0 {
        return None;
    }
    let answer = f(btf);
    // SAFETY: ours, freed once.
    unsafe { libbpf_sys::btf__free(btf) };
    Some(answer)
}

/// The id in `btf`, a live BTF object, of what `target` attaches to: a
/// tracepoint's typedef, or an iterator's function (`iter/task`:
/// `bpf_iter_task`), as libbpf finds them.
fn id_in(btf: *mut libbpf_sys::btf, target: &str) -> Option<u32> {
    let (name, kind) = match target.strip_prefix("iter/") {
        Some(iterator) => (format!("bpf_iter_{iterator}"), libbpf_sys::BTF_KIND_FUNC),
        None => (format!("btf_trace_{target}"), libbpf_sys::BTF_KIND_TYPEDEF),
    };
    let name = CString::new(name).ok()?;
    // SAFETY: a live BTF object and a C string.
    let id = unsafe { libbpf_sys::btf__find_by_name_kind(btf, name.as_ptr(), kind) };
    (id > 0).then_some(id as u32)
}

/// The id of `target`, looked up now if it is not among the ids.
fn id_of(target: &str) -> Option<u32> {
    let mut ids = IDS.lock().unwrap_or_else(|e| e.into_inner());
    let ids = ids.as_mut()?;
    if let Some(id) = ids.get(target) {
        return Some(*id);
    }
    let found = look_up(&[target])?;
    ids.extend(found);
    ids.get(target).copied()
}

/// What a program's section attaches to: `tp_btf/<tracepoint>`'s
/// tracepoint, or `iter/<name>` whole.
fn target_of(prog: *const libbpf_sys::bpf_program) -> Option<String> {
    // SAFETY: libbpf's program, alive for the callback.
    let section = unsafe { libbpf_sys::bpf_program__section_name(prog) };
    if section.is_null() {
        return None;
    }
    // SAFETY: a C string owned by the program.
    let section = unsafe { CStr::from_ptr(section) }.to_str().ok()?;
    match section.strip_prefix("tp_btf/") {
        Some(tracepoint) => Some(tracepoint.to_string()),
        None => section.starts_with("iter/").then(|| section.to_string()),
    }
}

/// At open: not a program that needs the kernel's BTF (libbpf's test is
/// its type and `attach_prog_fd`).
unsafe extern "C" fn setup(prog: *mut libbpf_sys::bpf_program, _cookie: c_long) -> c_int {
    // SAFETY: the program libbpf is setting up; no name: nothing looked up.
    unsafe { libbpf_sys::bpf_program__set_attach_target(prog, NOT_A_PROGRAM, std::ptr::null()) }
}

/// At load: the target's id, in the kernel's own BTF.
unsafe extern "C" fn prepare(prog: *mut libbpf_sys::bpf_program, opts: *mut libbpf_sys::bpf_prog_load_opts, _cookie: c_long) -> c_int {
    let Some(id) = target_of(prog).as_deref().and_then(id_of) else {
        return -libc::ENOENT;
    };
    // SAFETY: the options libbpf is about to load the program with.
    let opts = unsafe { &mut *opts };
    opts.attach_prog_fd = 0;
    opts.attach_btf_obj_fd = 0;
    opts.attach_btf_id = id;
    0
}

/// Attaching, for objects that attach through libbpf (the floor, top): as
/// libbpf attaches a `tp_btf` program.
unsafe extern "C" fn attach(prog: *const libbpf_sys::bpf_program, _cookie: c_long, link: *mut *mut libbpf_sys::bpf_link) -> c_int {
    // SAFETY: a loaded program; libbpf returns a link or an error pointer.
    let made = unsafe { libbpf_sys::bpf_program__attach_trace(prog) };
    let err = unsafe { libbpf_sys::libbpf_get_error(made as *const _) };
    if err != 0 {
        return err as c_int;
    }
    // SAFETY: where libbpf wants the link.
    unsafe { *link = made };
    0
}

/// Our handlers for `tp_btf` and `iter` sections, before libbpf's own:
/// true if the first is in place. An iterator without ours is libbpf's
/// (live.rs attaches it itself).
fn register() -> bool {
    let handler = |attach_fn| libbpf_sys::libbpf_prog_handler_opts {
        sz: std::mem::size_of::<libbpf_sys::libbpf_prog_handler_opts>() as _,
        prog_setup_fn: Some(setup),
        prog_prepare_load_fn: Some(prepare),
        prog_attach_fn: attach_fn,
        ..Default::default()
    };
    let tracing = libbpf_sys::BPF_PROG_TYPE_TRACING;
    // SAFETY: libbpf copies the section names; the callbacks live as long as the process.
    unsafe {
        libbpf_sys::libbpf_register_prog_handler(c"iter+".as_ptr(), tracing, libbpf_sys::BPF_TRACE_ITER, &handler(None));
        libbpf_sys::libbpf_register_prog_handler(c"tp_btf+".as_ptr(), tracing, libbpf_sys::BPF_TRACE_RAW_TP, &handler(Some(attach))) > 0
    }
}

/// After a load the kernel refused: if the ids came from the cache and
/// the kernel's BTF says otherwise, takes and keeps its ids instead; true
/// if they changed (the load is worth another try).
pub fn look_again() -> bool {
    if !installed() {
        return false;
    }
    let Some(found) = look_up(TARGETS) else { return false };
    let mut ids = IDS.lock().unwrap_or_else(|e| e.into_inner());
    let Some(ids) = ids.as_mut() else { return false };
    if TARGETS.iter().all(|t| ids.get(*t) == found.get(*t)) {
        return false;
    }
    ids.extend(found);
    if let Some(path) = kept() {
        crate::linux::host::replace_file(&path, |tmp| std::fs::write(tmp, to_text(ids)).is_ok());
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_ids_read_back_only_whole() {
        let ids: HashMap<String, u32> = [("sys_exit".to_string(), 1234), ("sys_enter".to_string(), 1233)].into();
        assert_eq!(parse(&to_text(&ids)), Some(ids));
        assert_eq!(parse("sys_exit 1234\nsys_enter\n"), None);
        assert_eq!(parse("sys_exit 0\n"), None, "0 is no type");
        assert_eq!(parse("sys_exit x\n"), None);
    }
}
