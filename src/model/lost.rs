//! What went unseen: counters, all zero when everything was counted.

use serde::{Deserialize, Serialize};

/// What went unseen. Each counter is in calls unless its doc says otherwise;
/// all zero when everything was counted.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Lost {
    /// New tasks of a target left untraced: no memory for their state (tasks).
    pub tasks_untraced: u64,
    /// Calls of exited threads that could not be handed over (ring buffer full).
    pub exit_records: u64,
    /// Calls of repeated arguments with no room in the argument table.
    pub argument_table_full: u64,
    /// Calls whose argument entry could not be allocated.
    pub argument_alloc_failed: u64,
    /// Calls summarised as one-shot without checking for repeats: the table
    /// of keys seen once was full.
    pub once_table_full: u64,
    /// Failed calls whose errno was not kept.
    pub errno_table_full: u64,
    /// Calls whose path could not be read from the target's memory.
    pub path_unreadable: u64,
    /// Calls whose path was longer than sysdiet keeps (255 bytes), shown cut.
    pub path_truncated: u64,
    /// Repeated paths whose string had no room: they show with no path (keys).
    pub path_strings: u64,
    /// Calls made through the 32-bit entry (i386's `int 0x80`, AArch32):
    /// not counted under the native table's names.
    pub compat_syscalls: u64,
    /// Calls with a number beyond the native table (x32 on x86-64).
    pub syscall_nr_out_of_range: u64,
    /// Stack samples dropped because sysdiet read them too slowly (samples).
    #[serde(default)]
    pub samples_dropped: u64,
    /// Calls of repeated read/write keys whose byte-count histogram had no room.
    #[serde(default)]
    pub histogram_table_full: u64,
    /// Processes whose environment at exec was not seen (ring buffer
    /// full): rules read sysdiet's view of it for them (processes).
    #[serde(default)]
    pub environments: u64,
    /// Calls of ended processes' repeated arguments that top/serve kept no
    /// key for: their program (or all programs) had their budget of keys
    /// already. Their syscalls' counts have them.
    #[serde(default)]
    pub argument_keys_over_budget: u64,
    /// Processes whose exec was seen while not one syscall's end was: the
    /// kernel never ran the syscall-exit hook, and every count is missing
    /// (processes; docs/kernels.md has where this was seen).
    #[serde(default)]
    pub syscall_exits_unseen: u64,
    /// Calls of a new path summarised as one-shot, not under their path:
    /// another thread was taking a slot of the same few at that moment.
    /// Their syscalls' counts have them.
    #[serde(default)]
    pub first_sighting_races: u64,
    /// Calls not counted: their thread had counts for as many kinds of
    /// syscall as its state holds, and the table beyond it was full.
    #[serde(default)]
    pub syscall_spill_full: u64,
    /// Syscall ends, and forks, execs and thread exits, on the whole host
    /// at which the kernel did not run sysdiet's hook, because a run of it
    /// was under way on that CPU (one preempted, which kernels since 7.x
    /// can do): each syscall end a call, each exit a thread's counts, each
    /// fork or exec a task's, that may have gone uncounted.
    #[serde(default)]
    pub hook_runs_missed: u64,
    /// Failed lookups of paths tried once that could not be sent by name
    /// (ring buffer full): rules that read where a search looked
    /// (library-search) see fewer. Their syscalls' counts have them (lookups).
    #[serde(default)]
    pub failure_names: u64,
}

/// One list of Lost's counters: a field left out of it does not compile
/// (`zip_with` builds a whole Lost from it).
macro_rules! lost_counters {
    ($($field:ident),* $(,)?) => {
        impl Lost {
            /// Every counter, zero ones too, by its JSON name.
            pub fn counters(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($field), self.$field)),*]
            }

            /// Each counter as `f` makes it of this and `other`'s.
            fn zip_with(&self, other: &Lost, f: impl Fn(u64, u64) -> u64) -> Lost {
                Lost { $($field: f(self.$field, other.$field)),* }
            }
        }
    };
}

lost_counters!(
    tasks_untraced,
    exit_records,
    argument_table_full,
    argument_alloc_failed,
    once_table_full,
    errno_table_full,
    path_unreadable,
    path_truncated,
    path_strings,
    compat_syscalls,
    syscall_nr_out_of_range,
    samples_dropped,
    histogram_table_full,
    environments,
    argument_keys_over_budget,
    syscall_exits_unseen,
    first_sighting_races,
    syscall_spill_full,
    hook_runs_missed,
    failure_names,
);

impl Lost {
    /// What was lost since `before` (running totals).
    pub fn since(&self, before: &Lost) -> Lost {
        self.zip_with(before, u64::saturating_sub)
    }

    /// Each counter summed with `other`'s: two tracers' losses in one run.
    pub fn plus(&self, other: &Lost) -> Lost {
        self.zip_with(other, u64::saturating_add)
    }

    /// The larger of each counter.
    pub fn largest(&self, other: &Lost) -> Lost {
        self.zip_with(other, u64::max)
    }

    /// Lost counters that make call counts incomplete (not just details).
    pub fn counts_incomplete(&self) -> bool {
        self.tasks_untraced
            + self.exit_records
            + self.compat_syscalls
            + self.syscall_nr_out_of_range
            + self.syscall_exits_unseen
            + self.syscall_spill_full
            + self.hook_runs_missed
            > 0
    }

    /// Lost counters that make per-argument stats incomplete: findings that
    /// read arguments (repeated paths, tiny I/O, ...) may be missing.
    pub fn arguments_incomplete(&self) -> bool {
        self.counts_incomplete()
            || self.argument_table_full
                + self.argument_alloc_failed
                + self.once_table_full
                + self.path_strings
                + self.histogram_table_full
                + self.argument_keys_over_budget
                + self.first_sighting_races
                > 0
    }
}

#[cfg(test)]
mod tests {
    use super::Lost;

    #[test]
    fn the_counter_list_is_the_json_form() {
        let lost = Lost { tasks_untraced: 1, argument_keys_over_budget: 15, ..Default::default() };
        let json = serde_json::to_value(&lost).unwrap();
        let listed = lost.counters();
        assert_eq!(listed.len(), json.as_object().unwrap().len());
        for (name, n) in listed {
            assert_eq!(json[name], n, "{name}");
        }
        let since = Lost { tasks_untraced: 5, path_strings: 2, ..Default::default() }.since(&Lost {
            tasks_untraced: 3,
            path_strings: 4,
            ..Default::default()
        });
        assert_eq!((since.tasks_untraced, since.path_strings), (2, 0));
    }

    #[test]
    fn calls_spilled_past_room_or_missed_by_the_hook_make_counts_incomplete() {
        assert!(!Lost { samples_dropped: 9, ..Default::default() }.counts_incomplete());
        assert!(Lost { syscall_spill_full: 1, ..Default::default() }.counts_incomplete());
        assert!(Lost { hook_runs_missed: 1, ..Default::default() }.counts_incomplete());
    }
}
