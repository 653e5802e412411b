//! What went unseen, in words: one line per non-zero counter of Lost.

use crate::linux::arch;
use crate::model::Lost;

/// (what, count) of every non-zero counter of `lost`: `what` agrees with
/// the count ("1 call", "2 calls").
pub fn lost_lines(lost: &Lost) -> Vec<(&'static str, u64)> {
    [
        (("task untraced: no memory for its state", "tasks untraced: no memory for their state"), lost.tasks_untraced),
        (("call of exited threads lost: ring buffer full", "calls of exited threads lost: ring buffer full"), lost.exit_records),
        (("call without argument stats: table full", "calls without argument stats: table full"), lost.argument_table_full),
        (("call without argument stats: allocation failed", "calls without argument stats: allocation failed"), lost.argument_alloc_failed),
        (("call not checked for repeats: one-shot table full", "calls not checked for repeats: one-shot table full"), lost.once_table_full),
        (("failed call without errno: table full", "failed calls without errno: table full"), lost.errno_table_full),
        (("call with an unreadable path", "calls with unreadable paths"), lost.path_unreadable),
        (("call with a path cut at 255 bytes", "calls with paths cut at 255 bytes"), lost.path_truncated),
        (("repeated path without its string: table full", "repeated paths without their string: table full"), lost.path_strings),
        (arch::COMPAT_NOT_COUNTED, lost.compat_syscalls),
        (arch::UNKNOWN_NR_NOT_COUNTED, lost.syscall_nr_out_of_range),
        (("stack sample dropped: ring buffer full", "stack samples dropped: ring buffer full"), lost.samples_dropped),
        (("call without byte-count histograms: table full", "calls without byte-count histograms: table full"), lost.histogram_table_full),
        (
            (
                "process whose exec (environment, file) was not seen: ring buffer full",
                "processes whose exec (environment, file) was not seen: ring buffer full",
            ),
            lost.environments,
        ),
        (
            ("call without argument stats: its program's key budget was spent", "calls without argument stats: their program's key budget was spent"),
            lost.argument_keys_over_budget,
        ),
        (
            (
                "process whose exec was seen but no syscall's end: the kernel never ran the exit hook, counts missing",
                "processes whose exec was seen but no syscall's end: the kernel never ran the exit hook, counts missing",
            ),
            lost.syscall_exits_unseen,
        ),
        (
            (
                "call of a new path counted as one-shot: another thread was taking its slot",
                "calls of new paths counted as one-shot: other threads were taking their slots",
            ),
            lost.first_sighting_races,
        ),
        (
            (
                "call not counted: its thread's syscall table and the spill table full",
                "calls not counted: their threads' syscall tables and the spill table full",
            ),
            lost.syscall_spill_full,
        ),
        (
            (
                "event on the host the kernel ran no hook of sysdiet's for (one was under way on its CPU): a call, or an exited thread's counts, may be uncounted",
                "events on the host the kernel ran no hook of sysdiet's for (one was under way on their CPU): calls, or exited threads' counts, may be uncounted",
            ),
            lost.hook_runs_missed,
        ),
        (("failed lookup counted but not named: ring buffer full", "failed lookups counted but not named: ring buffer full"), lost.failure_names),
    ]
    .into_iter()
    .filter(|(_, n)| *n > 0)
    .map(|((one, many), n)| (if n == 1 { one } else { many }, n))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_count_of_one_reads_in_the_singular() {
        let lost = Lost { path_unreadable: 1, path_truncated: 2, ..Default::default() };
        assert_eq!(lost_lines(&lost), vec![("call with an unreadable path", 1), ("calls with paths cut at 255 bytes", 2)]);
    }
}
