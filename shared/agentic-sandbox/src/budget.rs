//! The running account a run keeps of what its prompt may spend over all its runs (see
//! `limits`): what earlier runs spent, plus what this run spends, refused past a limit.
//! Stored values are measured from the memory the run is given, so they count however many
//! rounds ago they were stored.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io::Write;

use serde_json::{Map, Value as Json};

use crate::limits::{PromptLimits, Spent};
use crate::stop::{HostError, HostResult, Stop};

/// One run's account of the prompt's budget: what the prompt had spent when the run began,
/// plus what the run spends, and the JSON size of every stored value.
pub(crate) struct Budget {
    limits: PromptLimits,
    spent: Cell<Spent>,
    /// What each key in the memory costs (see [`entry_cost`]): earlier rounds' keys too.
    stored: RefCell<HashMap<String, usize>>,
    /// The sum of `stored`.
    stored_total: Cell<usize>,
}

/// What the host holds for one stored entry besides its key and JSON: the map entries, the
/// value's tree. Charged so that millions of tiny values cannot hide in a small total.
const ENTRY_OVERHEAD_BYTES: usize = 64;

/// What keeping `bytes` of JSON under `key` costs against the storage limit.
fn entry_cost(key: &str, bytes: usize) -> usize {
    key.len()
        .saturating_add(bytes)
        .saturating_add(ENTRY_OVERHEAD_BYTES)
}

impl Budget {
    /// `memory_bytes` caps `max_stored_bytes`: every stored value is also copied into the run.
    pub fn new(
        limits: PromptLimits,
        memory_bytes: usize,
        spent: Spent,
        memory: &Map<String, Json>,
    ) -> Budget {
        let stored: HashMap<String, usize> = memory
            .iter()
            .map(|(key, value)| (key.clone(), entry_cost(key, json_len(value))))
            .collect();
        let stored_total = stored
            .values()
            .fold(0_usize, |total, cost| total.saturating_add(*cost));
        Budget {
            limits: PromptLimits {
                max_stored_bytes: limits.max_stored_bytes.min(memory_bytes),
                ..limits
            },
            spent: Cell::new(spent),
            stored: RefCell::new(stored),
            stored_total: Cell::new(stored_total),
        }
    }

    pub fn spent(&self) -> Spent {
        self.spent.get()
    }

    /// Counts one `output()` call of `bytes` of text, or refuses it.
    pub fn count_output(&self, bytes: usize) -> HostResult<()> {
        let mut spent = self.spent.get();
        if spent.output_calls >= self.limits.max_output_calls {
            return Err(stop(format!(
                "Output limit of {} output() calls per prompt reached",
                self.limits.max_output_calls
            )));
        }
        spent.output_calls += 1;
        spent.output_bytes = self.output_bytes_after(spent.output_bytes, bytes)?;
        spent.events = self.events_after(spent.events, 1)?;
        self.spent.set(spent);
        Ok(())
    }

    /// Counts `bytes` of `complete()` text, shown to the user like `output()`'s.
    pub fn count_completion_text(&self, bytes: usize) -> HostResult<()> {
        let mut spent = self.spent.get();
        spent.output_bytes = self.output_bytes_after(spent.output_bytes, bytes)?;
        self.spent.set(spent);
        Ok(())
    }

    /// How many bytes of log text the prompt may still write.
    pub fn log_bytes_left(&self) -> usize {
        self.limits
            .max_log_bytes
            .saturating_sub(self.spent.get().log_bytes)
    }

    /// Counts one log line of `bytes` (without its newline), or refuses it.
    pub fn count_log(&self, bytes: usize) -> HostResult<()> {
        let mut spent = self.spent.get();
        if spent.log_entries >= self.limits.max_log_entries {
            return Err(stop(format!(
                "Log limit of {} lines per prompt reached",
                self.limits.max_log_entries
            )));
        }
        let total = spent.log_bytes.saturating_add(bytes).saturating_add(1);
        if total > self.limits.max_log_bytes {
            return Err(self.log_bytes_stop());
        }
        spent.log_entries += 1;
        spent.log_bytes = total;
        self.spent.set(spent);
        Ok(())
    }

    pub fn log_bytes_stop(&self) -> HostError {
        stop(format!(
            "Log limit of {} per prompt exceeded",
            size(self.limits.max_log_bytes)
        ))
    }

    /// Counts one `llm()`/`llmJson()` call, or refuses it.
    pub fn count_llm_call(&self) -> HostResult<()> {
        let mut spent = self.spent.get();
        if spent.llm_calls >= self.limits.max_llm_calls {
            return Err(stop(format!(
                "llm() call limit of {} per prompt reached",
                self.limits.max_llm_calls
            )));
        }
        spent.llm_calls += 1;
        spent.events = self.events_after(spent.events, 1)?;
        self.spent.set(spent);
        Ok(())
    }

    /// Counts `count` tool calls as events, or refuses all of them.
    pub fn count_tool_events(&self, count: u32) -> HostResult<()> {
        let mut spent = self.spent.get();
        spent.events = self.events_after(spent.events, count)?;
        self.spent.set(spent);
        Ok(())
    }

    /// How many more JSON bytes `store(key, …)` may keep under `key` (what the key holds now
    /// is given back when it is replaced).
    pub fn stored_bytes_left_for(&self, key: &str) -> usize {
        let current = self.stored.borrow().get(key).copied().unwrap_or(0);
        let others = self.stored_total.get().saturating_sub(current);
        self.limits
            .max_stored_bytes
            .saturating_sub(others)
            .saturating_sub(entry_cost(key, 0))
    }

    /// Counts the JSON bytes `store(key, …)` is about to keep (`None`: the key is deleted).
    pub fn count_stored(&self, key: &str, bytes: Option<usize>) -> HostResult<()> {
        if let Some(bytes) = bytes
            && bytes > self.stored_bytes_left_for(key)
        {
            return Err(self.stored_stop());
        }
        let mut stored = self.stored.borrow_mut();
        let before = match bytes {
            Some(bytes) => stored.insert(key.to_owned(), entry_cost(key, bytes)),
            None => stored.remove(key),
        };
        let total = self
            .stored_total
            .get()
            .saturating_sub(before.unwrap_or(0))
            .saturating_add(bytes.map_or(0, |bytes| entry_cost(key, bytes)));
        self.stored_total.set(total);
        Ok(())
    }

    pub fn stored_stop(&self) -> HostError {
        stop(format!(
            "Storage limit of {} per prompt exceeded by store() (remove values you no longer need with store(key, undefined))",
            size(self.limits.max_stored_bytes)
        ))
    }

    fn output_bytes_after(&self, spent: usize, bytes: usize) -> HostResult<usize> {
        let total = spent.saturating_add(bytes);
        if total > self.limits.max_output_bytes {
            return Err(stop(format!(
                "Output limit of {} bytes exceeded (text of output() and complete(), per prompt)",
                self.limits.max_output_bytes
            )));
        }
        Ok(total)
    }

    fn events_after(&self, spent: u32, count: u32) -> HostResult<u32> {
        let total = spent.saturating_add(count);
        if total > self.limits.max_events {
            return Err(stop(format!(
                "Event limit of {} per prompt reached (output(), tool and llm() calls)",
                self.limits.max_events
            )));
        }
        Ok(total)
    }
}

fn stop(message: String) -> HostError {
    HostError::Stop(Stop::new(message))
}

/// The length of `value`'s JSON text, without writing it anywhere.
fn json_len(value: &Json) -> usize {
    struct Counter(usize);
    impl Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(bytes.len());
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing a `Value` to a writer that never fails cannot fail.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// `64 MiB` for whole mebibytes, bytes otherwise.
pub(crate) fn size(bytes: usize) -> String {
    const MIB: usize = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}
