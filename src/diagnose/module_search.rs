//! module-search: a runtime's module loader walks a list of directories
//! for each module it loads, and asks each one again for the next module.
//! node looks for `node_modules` in the requiring file's directory and in
//! every ancestor up to the root (nodejs/node #1920); Python 3 stats every
//! sys.path entry before the one that holds the module, to see whether its
//! cached listing of the directory is stale. The cost is the list's length
//! times the modules, so it is one finding, not one per directory.

use foldhash::{HashMap, HashSet};

use super::{environment_of, prove, Evidence, Finding, Fix, Shared, PATH_LOOKUPS};
use crate::human::{quoted, thousands};
use crate::model::{Argument, ArgumentStats, Trace};

pub const ID: &str = "module-search";

/// Asked this often, a directory is a step of a walk made per module.
const MIN_EACH: u64 = 20;

/// A module found is looked up this many times at most by its loader.
const LOADER_LOOKS: u64 = 3;

/// Python's sys.path holds at most this many directories it stats on a
/// Debian system without PYTHONPATH (the script's, the standard library,
/// lib-dynload and two dist-packages): a walk that long is the default.
const PYTHON_DEFAULT_WALK: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Loader {
    /// Missing `node_modules`, asked for each package required by name.
    Node,
    /// sys.path entries, each stat'ed for each import that passes it.
    Python,
}

/// One process's walk: the directories it asked per module, kept by name.
pub(super) struct Walk<'a> {
    pid: u32,
    loader: Loader,
    steps: Vec<&'a ArgumentStats>,
    /// The directory the modules were found in, when the trace shows it.
    holder: Option<String>,
    /// The modules found there that were looked up again (node's realpath,
    /// Python's loader after its finder): the loader's too.
    found: Vec<&'a ArgumentStats>,
    /// Longer than the layout every program of the runtime has (one level
    /// of source below its node_modules, Python's default sys.path): worth
    /// a finding. A short walk is still the loader's, not repeated-path's.
    long: bool,
}

fn path_of(a: &ArgumentStats) -> Option<&str> {
    match &a.argument {
        Argument::Path { path: Some(p), .. } if p.starts_with('/') => Some(p.as_str()),
        _ => None,
    }
}

fn parent(path: &str) -> &str {
    match path.rsplit_once('/') {
        Some(("", _)) => "/",
        Some((dir, _)) => dir,
        None => "",
    }
}

/// The walks of every process, each process's at most one per loader.
pub(super) fn walks(trace: &Trace) -> Vec<Walk<'_>> {
    let by_pid = trace.arguments_by_pid();
    let mut pids: Vec<u32> = by_pid.keys().copied().collect();
    pids.sort_unstable();
    let mut out = Vec::new();
    for pid in pids {
        let arguments = &by_pid[&pid];
        let lookups: Vec<&ArgumentStats> =
            arguments.iter().copied().filter(|a| a.calls >= MIN_EACH && PATH_LOOKUPS.contains(&a.syscall.as_str()) && path_of(a).is_some()).collect();
        let node: Vec<&ArgumentStats> =
            lookups.iter().copied().filter(|a| a.errors * 2 >= a.calls && path_of(a).is_some_and(|p| p.ends_with("/node_modules"))).collect();
        // Packages found at the first node_modules asked are still looked
        // up again for their real path: the loader's, with no walk.
        let node_holder = holder(arguments, |p| p.find("/node_modules/").map(|i| &p[..i + "/node_modules".len()]));
        let found = again_under(arguments, node_holder.as_deref(), |rest| rest.is_empty() || rest.starts_with('/'));
        if !node.is_empty() || !found.is_empty() {
            let long = node.len() >= 2;
            out.push(Walk { pid, loader: Loader::Node, steps: node, holder: node_holder, found, long });
        }
        if let Some((steps, long)) = python_steps(trace, pid, &lookups) {
            let dirs: HashSet<&str> = steps.iter().filter_map(|a| path_of(a)).collect();
            let holder = holder(arguments, |p| Some(parent(p)).filter(|d| dirs.contains(d)));
            let found = again_under(arguments, holder.as_deref(), |rest| rest.rfind('/') == Some(0));
            out.push(Walk { pid, loader: Loader::Python, steps, holder, found, long });
        }
    }
    out
}

/// The directory most of the process's other lookups fall in, by
/// `container` (a path's directory of interest, if it has one): where
/// the loader found what it looked for, each module asked about by name.
fn holder(arguments: &[&ArgumentStats], container: impl Fn(&str) -> Option<&str>) -> Option<String> {
    let mut found: HashMap<&str, u64> = HashMap::default();
    for a in arguments.iter().filter(|a| a.errors == 0) {
        if let Some(dir) = path_of(a).and_then(&container) {
            *found.entry(dir).or_default() += 1;
        }
    }
    found.into_iter().max_by_key(|&(dir, n)| (n, std::cmp::Reverse(dir))).map(|(dir, _)| dir.to_string())
}

/// The sys.path entries process `pid` stat'ed per import: the successful
/// lookups, as often as those of a directory Python's layout or
/// PYTHONPATH names; and whether the walk is long: longer than the
/// default one, or lengthened by PYTHONPATH.
fn python_steps<'a>(trace: &Trace, pid: u32, lookups: &[&'a ArgumentStats]) -> Option<(Vec<&'a ArgumentStats>, bool)> {
    let python_path = python_path(trace, pid);
    let from_python_path = |p: &str| python_path.contains(&p);
    let known = lookups.iter().filter(|a| a.errors == 0).find(|a| path_of(a).is_some_and(|p| from_python_path(p) || python_layout(p)))?;
    let named = || {
        lookups.iter().filter(|a| a.errors == 0 && a.syscall == known.syscall && path_of(a).is_some_and(|p| from_python_path(p) || python_layout(p)))
    };
    let least = named().map(|a| a.calls).min()?;
    let most = named().map(|a| a.calls).max()?;
    // Other directories asked as often (the script's): a file stat'ed far
    // more often is not on sys.path, and stays repeated-path's.
    let steps: Vec<&ArgumentStats> =
        lookups.iter().copied().filter(|a| a.errors == 0 && a.syscall == known.syscall && a.calls * 2 >= least && a.calls <= most * 2).collect();
    let lengthened = steps.iter().any(|a| path_of(a).is_some_and(from_python_path));
    let long = steps.len() > PYTHON_DEFAULT_WALK || (lengthened && steps.len() >= 3);
    Some((steps, long))
}

/// The directories of the process's PYTHONPATH, as Python reads them.
fn python_path(trace: &Trace, pid: u32) -> Vec<&str> {
    let value = environment_of(trace, Some(pid)).knobs.get("PYTHONPATH").map_or("", String::as_str);
    value.split(':').map(|e| e.trim_end_matches('/')).filter(|e| !e.is_empty()).collect()
}

/// A directory where Python installs modules: `.../lib/python3.11`,
/// `lib-dynload`, `site-packages`, `dist-packages`.
fn python_layout(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or("");
    matches!(name, "lib-dynload" | "site-packages" | "dist-packages")
        || name.strip_prefix("python").is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()) && v.contains('.'))
}

/// The successful lookups made again, a loader's few times (found, then
/// resolved or loaded), of paths under `holder` whose rest (from the `/`
/// after it) passes `under`. More often is repeated-path's.
fn again_under<'a>(arguments: &[&'a ArgumentStats], holder: Option<&str>, under: impl Fn(&str) -> bool) -> Vec<&'a ArgumentStats> {
    let Some(holder) = holder else { return Vec::new() };
    arguments
        .iter()
        .copied()
        .filter(|a| a.errors == 0 && (2..=LOADER_LOOKS).contains(&a.calls) && PATH_LOOKUPS.contains(&a.syscall.as_str()))
        .filter(|a| path_of(a).and_then(|p| p.strip_prefix(holder)).is_some_and(&under))
        .collect()
}

/// The (process, path) pairs the walks hold, the modules they found
/// included: repeated-path and failing-calls leave them to this rule.
pub(super) fn steps<'a>(walks: &[Walk<'a>]) -> HashSet<(u32, &'a str)> {
    walks.iter().flat_map(|w| w.steps.iter().chain(&w.found).copied().filter_map(move |a| path_of(a).map(|p| (w.pid, p)))).collect()
}

/// The rule alone, as its tests run it.
#[cfg(test)]
fn check(trace: &Trace) -> Vec<Finding> {
    check_shared(trace, &Shared::new(trace))
}

pub fn check_shared(trace: &Trace, shared: &Shared) -> Vec<Finding> {
    shared.walks().iter().filter(|w| w.long).map(|w| finding(trace, w)).collect()
}

fn finding(trace: &Trace, w: &Walk<'_>) -> Finding {
    let calls: u64 = w.steps.iter().map(|a| a.calls).sum();
    let kernel_ns: u64 = w.steps.iter().map(|a| a.total_ns).sum();
    let each = calls / w.steps.len() as u64;
    let syscall = w.steps[0].syscall.clone();
    // In the order the loader asks: node the deepest first, Python
    // PYTHONPATH's directories first, in its order.
    let python_path = python_path(trace, w.pid);
    let mut steps = w.steps.clone();
    steps.sort_by_key(|a| {
        let p = path_of(a).unwrap_or("");
        let rank = match w.loader {
            Loader::Node => usize::MAX - p.matches('/').count(),
            Loader::Python => python_path.iter().position(|e| *e == p).unwrap_or(usize::MAX),
        };
        (rank, p)
    });
    let named = |list: &[&ArgumentStats]| -> String {
        let names: Vec<String> = list.iter().filter_map(|a| path_of(a)).map(quoted).collect();
        match names.len() {
            0..=3 => names.join(", "),
            n => format!("{}, {} … {} ({n})", names[0], names[1], names[n - 1]),
        }
    };
    let found = w.holder.as_deref().map(|h| format!("; the modules were found in {}", quoted(h))).unwrap_or_default();
    let sites = w.steps.iter().flat_map(|a| a.sites.iter().cloned()).collect();
    let evidence = Evidence::new(trace, &syscall, calls, kernel_ns);
    match w.loader {
        Loader::Node => {
            let again = w.found.len() as u64;
            let mut why = format!(
                "for each package required by name, node asks the requiring file's directory and every ancestor for node_modules, \
                 and keeps the answer only for that name: {} directories without one ({}) were asked about {} times each{found}; \
                 NODE_PATH does not shorten this, node reads it only after every node_modules up to the root has failed",
                steps.len(),
                named(&steps),
                thousands(each),
            );
            if again > 0 {
                why.push_str(&format!(
                    "; {} paths of modules found were looked up again (realpath's lstat of each path component)",
                    thousands(again)
                ));
            }
            let mut fixes = vec![
                Fix::config(format!(
                    "keep the code next to the node_modules it requires from{}: node stops at the first directory that has the package",
                    w.holder.as_deref().map(|h| format!(" ({})", quoted(parent(h)))).unwrap_or_default()
                )),
                Fix::code("bundle the program (esbuild, webpack, ncc): one file, nothing to search at run time"),
                Fix::code("require the hot modules by a resolved path (require.resolve once, then require that path): no walk"),
            ];
            let options = environment_of(trace, Some(w.pid)).knobs.get("NODE_OPTIONS");
            let preserving = options.is_some_and(|o| o.contains("--preserve-symlinks"));
            let offered = again > 0 && !preserving;
            let mut proof = None;
            if offered {
                fixes.push(Fix::env("NODE_OPTIONS=--preserve-symlinks: node no longer resolves the real path of each module it loads"));
                if !trace.run.environment.knobs.contains_key("NODE_OPTIONS") {
                    proof = prove(trace, "--env NODE_OPTIONS=--preserve-symlinks");
                }
            }
            Finding {
                id: ID.into(),
                what: format!(
                    "{} × {syscall} failing with ENOENT: node_modules looked for in {} directories, {} times each",
                    thousands(calls),
                    steps.len(),
                    thousands(each)
                ),
                pid: Some(w.pid),
                evidence,
                sites,
                saving_ns: kernel_ns,
                why,
                fixes,
                tradeoff: Some(
                    "with --preserve-symlinks a package reached through two links loads twice, and a linked package finds its \
                     dependencies from the link's directory, not its own"
                        .into(),
                )
                .filter(|_| offered),
                prove: proof,
                ..Default::default()
            }
        }
        Loader::Python => {
            // The walk in sys.path order where PYTHONPATH gives it.
            let listed: Vec<&ArgumentStats> = python_path.iter().filter_map(|e| w.steps.iter().copied().find(|a| path_of(a) == Some(*e))).collect();
            let saving_ns = kernel_ns - w.steps.iter().find(|a| path_of(a) == w.holder.as_deref()).map_or(0, |a| a.total_ns);
            let mut why = format!(
                "for each import, Python asks every sys.path directory before the one that holds the module whether it changed \
                 (a stat, then the listing it keeps): {} directories ({}) were stat'ed about {} times each{found}",
                w.steps.len(),
                named(&steps),
                thousands(each),
            );
            let mut fixes = Vec::new();
            let mut proof = None;
            if !listed.is_empty() {
                why.push_str(&format!("; PYTHONPATH puts {} of them ahead of the standard library", listed.len()));
                let first = w.holder.as_deref().filter(|h| python_path.contains(h));
                fixes.push(Fix::env(match first {
                    Some(h) => format!("keep in PYTHONPATH only the directories that hold imported modules, {} first", quoted(h)),
                    None => "keep in PYTHONPATH only the directories that hold imported modules, the one that holds most first".into(),
                }));
                if let (Some(h), Some(value)) = (first, trace.run.environment.knobs.get("PYTHONPATH")) {
                    let rest = value.split(':').filter(|e| e.trim_end_matches('/') != h && !e.is_empty());
                    let reordered: Vec<&str> = std::iter::once(h).chain(rest).collect();
                    proof = prove(trace, &format!("--env {}", super::shell_quote(&format!("PYTHONPATH={}", reordered.join(":")))));
                }
            }
            fixes.push(Fix::config(
                "install the packages into one directory (one virtualenv's site-packages, or pip install --target DIR) \
                 rather than a directory each on sys.path (PYTHONPATH, .pth files)",
            ));
            fixes.push(Fix::code("import fewer modules where it is hot (import inside the function that needs it; python -X importtime lists them)"));
            Finding {
                id: ID.into(),
                what: format!("{} × {syscall} of {} sys.path directories, about {} times each", thousands(calls), w.steps.len(), thousands(each)),
                pid: Some(w.pid),
                evidence,
                sites,
                saving_ns,
                why,
                fixes,
                tradeoff: Some("another order changes which copy of a module is imported when two directories hold the same name".into()),
                prove: proof,
                ..Default::default()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testing::*;

    fn node(depth: usize) -> Trace {
        let mut t = trace(100_000_000, &[("statx", 4_000, 4_000_000)]);
        let mut dir = String::from("/srv/app");
        for i in 0..depth {
            dir.push_str(&format!("/d{i}"));
            argument(&mut t, "statx", path(&format!("{dir}/node_modules")), 300, 300_000).errors = 300;
        }
        for i in 0..300 {
            argument(&mut t, "statx", path(&format!("/srv/app/node_modules/p{i}")), 2, 2_000);
        }
        t
    }

    #[test]
    fn node_climbing_missing_node_modules() {
        let t = node(4);
        let f = check(&t);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].what, "1,200 × statx failing with ENOENT: node_modules looked for in 4 directories, 300 times each");
        assert!(f[0].why.contains("found in \"/srv/app/node_modules\""), "{}", f[0].why);
        assert!(
            f[0].why.contains("\"/srv/app/d0/d1/d2/d3/node_modules\", \"/srv/app/d0/d1/d2/node_modules\" … \"/srv/app/d0/node_modules\" (4)"),
            "{}",
            f[0].why
        );
        assert!(f[0].why.contains("300 paths of modules found were looked up again"), "{}", f[0].why);
        assert!(f[0].fixes[0].text.contains("(\"/srv/app\")"), "{:?}", f[0].fixes);
        assert_eq!(f[0].prove.as_deref(), Some("sysdiet compare --env NODE_OPTIONS=--preserve-symlinks -- ./app"));
        let claimed = steps(&walks(&t));
        assert!(claimed.contains(&(7, "/srv/app/d0/node_modules")) && claimed.contains(&(7, "/srv/app/node_modules/p1")));
    }

    #[test]
    fn one_missing_node_modules_or_few_asks_is_no_walk() {
        let one = node(1);
        assert!(check(&one).is_empty(), "one level below node_modules: every package's src/");
        assert!(steps(&walks(&one)).contains(&(7, "/srv/app/d0/node_modules")), "still the loader's, not repeated-path's");
        let mut t = trace(100_000_000, &[("statx", 40, 40_000)]);
        for d in ["/a/node_modules", "/a/b/node_modules"] {
            argument(&mut t, "statx", path(d), 10, 10_000).errors = 10;
        }
        assert!(check(&t).is_empty(), "asked 10 times each: a few modules");
    }

    fn python(python_path: Option<&str>, entries: &[&str]) -> Trace {
        let mut t = trace(100_000_000, &[("newfstatat", 10_000, 10_000_000)]);
        if let Some(v) = python_path {
            t.run.environment.knobs.insert("PYTHONPATH".into(), v.into());
        }
        for e in entries {
            argument(&mut t, "newfstatat", path(e), 311, 311_000);
        }
        for i in 0..300 {
            argument(&mut t, "newfstatat", path(&format!("/opt/last/mod{i}.py")), 2, 2_000);
        }
        t
    }

    #[test]
    fn python_stating_a_long_pythonpath() {
        let t = python(Some("/opt/p1:/opt/p2:/opt/last"), &["/work", "/opt/p1", "/opt/p2", "/opt/last", "/usr/lib/python3.11"]);
        let f = check(&t);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].what, "1,555 × newfstatat of 5 sys.path directories, about 311 times each");
        assert!(f[0].why.contains("found in \"/opt/last\""), "{}", f[0].why);
        assert!(f[0].why.contains("PYTHONPATH puts 3 of them"), "{}", f[0].why);
        assert!(f[0].fixes[0].text.contains("\"/opt/last\" first"), "{:?}", f[0].fixes);
        assert_eq!(f[0].prove.as_deref(), Some("sysdiet compare --env PYTHONPATH=/opt/last:/opt/p1:/opt/p2 -- ./app"));
        assert_eq!(f[0].saving_ns, 4 * 311_000, "all but the holder's");
    }

    #[test]
    fn a_file_stated_far_more_often_is_not_on_sys_path() {
        let mut t = python(Some("/opt/p1:/opt/p2:/opt/last"), &["/work", "/opt/p1", "/opt/p2", "/opt/last"]);
        argument(&mut t, "newfstatat", path("/etc/app.conf"), 10_000, 1_000_000);
        assert!(!steps(&walks(&t)).contains(&(7, "/etc/app.conf")));
        assert!(check(&t)[0].what.starts_with("1,244 × newfstatat of 4 sys.path directories"), "{:?}", check(&t));
    }

    #[test]
    fn python_default_sys_path_is_no_walk() {
        // Debian's own sys.path, no PYTHONPATH: the shortest walk there is.
        let default = ["/work", "/usr/lib/python3.11", "/usr/lib/python3.11/lib-dynload", "/usr/local/lib/python3.11/dist-packages"];
        let t = python(None, &default);
        assert!(check(&t).is_empty());
        assert_eq!(steps(&walks(&t)).len(), 4, "still the import system's, not repeated-path's");
        // Paths no Python layout names: repeated-path's.
        assert!(check(&python(None, &["/a", "/b", "/c", "/d", "/e", "/f", "/g"])).is_empty());
        // Six directories with site-packages among them: a long sys.path.
        let long = ["/w", "/a", "/b", "/c", "/d", "/v/lib/python3.12/site-packages"];
        assert_eq!(check(&python(None, &long)).len(), 1);
    }
}
