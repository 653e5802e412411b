//! signal-mask-churn: rt_sigprocmask at a high rate. The kernel side says
//! what each call did to the mask it found (only read it, set it to what it
//! was, changed it right after a change); the call sites say where they
//! come from: glibc's getcontext/setcontext/swapcontext and sigsetjmp(env,
//! 1)/siglongjmp save and restore the mask on every switch or jump.

use super::{called_through, Evidence, Finding, Fix};
use crate::human::{mask_change, thousands};
use crate::model::{Argument, MaskChange, Trace};

pub const ID: &str = "signal-mask-churn";

const UCONTEXT: &[&str] = &["getcontext", "setcontext", "swapcontext"];
const SIGJMP: &[&str] = &["sigsetjmp", "sigjmp_save", "siglongjmp", "longjmp", "libc_siglongjmp"];

/// Threads a process starts before its mask changes can be theirs.
const THREADS_PER_ITEM: u64 = 100;
/// A shell's own command loop (bash's, zsh's, dash's): a shell sets its
/// mask around each command it runs and each child it waits for, so a
/// script's loop changes it a few times a line. The shell's code is not
/// the user's to change; the script's number of commands is.
const SHELL_COMMANDS: &[&str] = &["execute_command_internal", "execute_simple_command", "execlist", "execpline", "evaltree", "evalcommand"];
const SHELL_FIX: &str = "the shell sets its signal mask around every command it runs: run fewer commands for the same \
     work (one printf or print -l for all the lines, awk or sed over the input instead of a loop of commands, one program \
     over many items instead of one each)";

pub fn check(trace: &Trace) -> Vec<Finding> {
    let mut out = Vec::new();
    let arguments = trace.arguments_by_pid();
    for p in &trace.processes {
        let Some(s) = p.syscalls.iter().find(|s| s.name == "rt_sigprocmask") else { continue };
        if s.calls < 2 {
            continue;
        }
        // What the calls did, most first.
        let mut kinds: Vec<(MaskChange, u64)> = arguments
            .get(&p.pid)
            .into_iter()
            .flatten()
            .filter(|a| a.syscall == "rt_sigprocmask")
            .filter_map(|a| match a.argument {
                Argument::SigMask { change } => Some((change, a.calls)),
                _ => None,
            })
            .collect();
        kinds.sort_by_key(|k| std::cmp::Reverse(k.1));
        let calls_of = |which: &[MaskChange]| kinds.iter().filter(|(k, _)| which.contains(k)).map(|k| k.1).sum::<u64>();
        let (unchanged, undone) = (calls_of(&[MaskChange::Query, MaskChange::Same]), calls_of(&[MaskChange::Undo]));
        let pointless = unchanged + undone;
        let share = |n: u64| format!("{:.0}%", 100.0 * n as f64 / s.calls as f64);
        let breakdown: Vec<String> =
            kinds.iter().filter(|(_, n)| n * 200 >= s.calls).take(3).map(|(k, n)| format!("{} {}", share(*n), mask_change(*k))).collect();

        let ucontext = called_through(trace, &s.sites, UCONTEXT);
        let sigjmp = called_through(trace, &s.sites, SIGJMP);
        // glibc's pthread_create blocks every signal around the clone and
        // sets it back, and the new thread sets its own: about four a thread.
        let threads = p.threads.len() as u64;
        let per_thread = threads >= THREADS_PER_ITEM && s.calls <= threads * 6 && !ucontext && !sigjmp;
        // An undo changes the mask, but the pair leaves it as it was.
        let mut why = match (unchanged, undone) {
            (_, 0) => format!("{} of the calls change no signal mask", share(unchanged)),
            (0, _) => format!("{} of the calls undo the change made just before, with no call between", share(undone)),
            _ => format!("{} of the calls change no signal mask and {} undo the change made just before", share(unchanged), share(undone)),
        };
        let mut fixes = Vec::new();
        if ucontext {
            why.push_str("; they come from glibc's getcontext/setcontext/swapcontext, which save and restore the mask on every context switch");
            fixes.push(Fix::code(
                "switch contexts without the mask: _setjmp/_longjmp-based or hand-written switching (Ruby 1.8 did this when built without --enable-pthread)",
            ));
            fixes.push(Fix::config("if the program can be built with another context-switch method than ucontext, choose it"));
        }
        if per_thread {
            why = format!(
                "the calls come with each of the {} threads started, about {} a thread: glibc's pthread_create blocks every \
                 signal around the clone and sets the mask back, and the new thread sets its own",
                thousands(threads),
                s.calls / threads
            );
            fixes.push(Fix::code(
                "start a pool of threads once and hand them the work (Python's concurrent.futures.ThreadPoolExecutor, a fixed \
                 set of workers) instead of a thread per item",
            ));
        }
        if sigjmp {
            why.push_str("; they come from sigsetjmp(env, 1)/siglongjmp, which save and restore the mask on every jump");
            fixes.push(Fix::code("use sigsetjmp(env, 0) or _setjmp/_longjmp where the mask does not change between jump and target"));
        }
        let shell = !ucontext && !sigjmp && !per_thread && called_through(trace, &s.sites, SHELL_COMMANDS);
        if shell {
            why.push_str("; they come from the shell running a script, around each command it runs and each child it waits for");
            fixes.push(Fix::code(SHELL_FIX));
        }
        for (k, _) in kinds.iter().take(2).filter(|_| !shell) {
            match k {
                MaskChange::Query if !ucontext && !sigjmp => fixes.push(Fix::code("the calls only read the mask: keep it in a variable instead")),
                MaskChange::Same if !ucontext && !sigjmp => fixes.push(Fix::code("skip the call when the mask is already the one wanted")),
                MaskChange::Undo | MaskChange::Block | MaskChange::Unblock if !ucontext && !sigjmp && !per_thread => {
                    fixes.push(Fix::code("block signals once around the loop instead of around every operation"))
                }
                _ => {}
            }
        }
        if fixes.is_empty() {
            fixes.push(Fix::code("change the mask once around the hot loop, not per operation"));
        }
        fixes.dedup();
        out.push(Finding {
            id: ID.into(),
            what: format!("{} × rt_sigprocmask ({})", thousands(s.calls), breakdown.join(", ")),
            pid: Some(p.pid),
            // A mask changed around each operation: a context switch, a fork.
            evidence: Evidence { per_item: true, ..Evidence::new(trace, "rt_sigprocmask", s.calls, s.total_ns) },
            sites: s.sites.clone(),
            // Pointless calls can all go; real changes are counted too when
            // the source (a context switch, a jump) can drop the mask.
            saving_ns: if ucontext || sigjmp { s.total_ns } else { s.total_ns * pointless / s.calls.max(1) },
            why,
            fixes,
            ..Default::default()
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::testing::*;

    fn mask_trace(change: MaskChange, through: &[&str]) -> Trace {
        let mut t = trace(1_000_000_000, &[("rt_sigprocmask", 200_000, 20_000_000)]);
        let s = site(&mut t, through);
        t.processes[0].syscalls[0].sites = s;
        argument(&mut t, "rt_sigprocmask", Argument::SigMask { change }, 200_000, 20_000_000);
        t
    }

    #[test]
    fn a_thread_per_item_is_told() {
        let mut t = mask_trace(MaskChange::Block, &["__pthread_sigmask", "__pthread_create_2_1", "serve"]);
        let calls = t.processes[0].syscalls[0].calls;
        t.processes[0].threads = (0..calls as u32 / 4).map(|tid| crate::model::Thread { tid, ..Default::default() }).collect();
        let f = check(&t);
        assert!(f[0].why.contains("pthread_create blocks every signal"), "{}", f[0].why);
        assert!(f[0].fixes[0].text.contains("ThreadPoolExecutor"), "{:?}", f[0].fixes);
    }

    #[test]
    fn a_shells_own_mask_changes_are_told_to_the_script() {
        // zsh -c 'for i in {1..3000}; do print $i; done': three a line.
        let f = check(&mask_trace(MaskChange::Undo, &["__GI___sigprocmask", "signal_block", "execlist", "zsh_main"]));
        assert!(f[0].why.contains("the shell running a script"), "{}", f[0].why);
        assert!(f[0].fixes[0].text.contains("run fewer commands"), "{:?}", f[0].fixes);
        assert!(f[0].fixes.iter().all(|x| !x.text.contains("around the loop instead")), "{:?}", f[0].fixes);
        // The same changes from a C program's own loop keep their fix.
        let f = check(&mask_trace(MaskChange::Undo, &["__GI___sigprocmask", "process_item", "main"]));
        assert!(f[0].fixes[0].text.contains("block signals once around the loop"), "{:?}", f[0].fixes);
    }

    #[test]
    fn swapcontext_is_named_with_its_fix() {
        let f = check(&mask_trace(MaskChange::Same, &["__GI___sigprocmask", "swapcontext", "main"]));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].what, "200,000 × rt_sigprocmask (100% sets the mask it has)");
        assert!(f[0].why.contains("swapcontext"), "{}", f[0].why);
        assert!(f[0].fixes[0].text.contains("_setjmp/_longjmp"));
        assert_eq!(f[0].saving_ns, 20_000_000);
    }

    #[test]
    fn sigsetjmp_gets_the_zero_flag_fix() {
        let f = check(&mask_trace(MaskChange::Query, &["__GI___sigprocmask", "__sigjmp_save", "main"]));
        assert!(f[0].fixes.iter().any(|x| x.text.contains("sigsetjmp(env, 0)")));
    }

    #[test]
    fn a_query_loop_is_told_to_keep_the_mask() {
        let f = check(&mask_trace(MaskChange::Query, &["__GI___sigprocmask", "main"]));
        assert!(f[0].fixes[0].text.contains("keep it in a variable"));
        assert!(f[0].why.starts_with("100% of the calls change no signal mask"));
    }

    #[test]
    fn undone_changes_are_said_as_such() {
        let f = check(&mask_trace(MaskChange::Undo, &["__GI___sigprocmask", "main"]));
        assert!(f[0].why.starts_with("100% of the calls undo the change made just before"), "{}", f[0].why);
        assert!(f[0].fixes[0].text.contains("block signals once around the loop"));
        assert_eq!(f[0].saving_ns, 20_000_000);
    }

    #[test]
    fn real_changes_save_nothing_without_a_known_source() {
        let f = check(&mask_trace(MaskChange::Block, &["__GI___sigprocmask", "main"]));
        assert_eq!(f[0].saving_ns, 0);
        assert!(f[0].fixes[0].text.contains("block signals once around the loop"));
    }

    #[test]
    fn no_mask_calls_no_finding() {
        assert!(check(&trace(1, &[("read", 5, 5)])).is_empty());
    }
}
