//! What a run reads from outside its code besides its host calls: the time (`Date.now()`,
//! `new Date()`, `performance.now()`) and randomness (`Math.random()`). Every read is
//! recorded, so that the run can be repeated exactly: a run made [`Entropy::replaying`] a
//! record reads the same values in the same order (then, past the record, live ones again).
//! `Math.random()` comes from a seeded generator, so its record is its seed.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher as _, Hasher as _};
use std::sync::{Arc, Mutex, PoisonError};

/// Reads of the clocks one run records at most (about 160 KB): a run that reads more still
/// runs, but its record is incomplete (see [`EntropyRecord::complete`]).
pub const MAX_RECORDED_READS: usize = 10_000;

/// A run's source of time and randomness, shared between the sandbox (which reads it) and
/// the caller (which keeps its record). Clones share it.
#[derive(Clone, Debug)]
pub struct Entropy(Arc<Mutex<State>>);

/// The same source, not merely equal reads.
impl PartialEq for Entropy {
    fn eq(&self, other: &Entropy) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

#[derive(Debug)]
struct State {
    seed: u64,
    /// The generator's state: splitmix64, advanced once per `Math.random()`.
    random: u64,
    times: Reads,
    elapsed: Reads,
    /// A read was not recorded (past [`MAX_RECORDED_READS`]).
    overflowed: bool,
}

/// One clock's reads: recorded ones first (answered in order while replaying), then live ones
/// appended as they are made.
#[derive(Debug, Default)]
struct Reads {
    values: Vec<f64>,
    /// How many of `values` were read back so far.
    read: usize,
}

/// What a run read, for a later [`Entropy::replaying`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EntropyRecord {
    pub seed: u64,
    pub times: Vec<f64>,
    pub elapsed: Vec<f64>,
    /// Every read is in the record: false once a run read more than [`MAX_RECORDED_READS`].
    pub complete: bool,
}

impl Default for Entropy {
    /// A fresh source: a random seed, the real clocks.
    fn default() -> Entropy {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_nanos()),
        );
        Entropy::replaying(&EntropyRecord {
            seed: hasher.finish(),
            complete: true,
            ..EntropyRecord::default()
        })
    }
}

impl Entropy {
    /// A source that answers the reads of `record` in order, then reads the real clocks.
    pub fn replaying(record: &EntropyRecord) -> Entropy {
        Entropy(Arc::new(Mutex::new(State {
            seed: record.seed,
            random: record.seed,
            times: Reads {
                values: record.times.clone(),
                read: 0,
            },
            elapsed: Reads {
                values: record.elapsed.clone(),
                read: 0,
            },
            overflowed: !record.complete,
        })))
    }

    /// Everything read so far (a replayed prefix included).
    pub fn record(&self) -> EntropyRecord {
        let state = self.state();
        EntropyRecord {
            seed: state.seed,
            times: state.times.values.clone(),
            elapsed: state.elapsed.values.clone(),
            complete: !state.overflowed,
        }
    }

    /// `Date.now()`: ms since the Unix epoch, whole, as the engine's own.
    pub(crate) fn now_ms(&self) -> f64 {
        self.read(
            |state| &mut state.times,
            || {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0.0, |since| since.as_millis() as f64)
            },
        )
    }

    /// `performance.now()`: `live` is the run's clock, read only when no record answers.
    pub(crate) fn elapsed_ms(&self, live: impl FnOnce() -> f64) -> f64 {
        self.read(|state| &mut state.elapsed, live)
    }

    /// `Math.random()`: in [0, 1), 53 random bits.
    pub(crate) fn random(&self) -> f64 {
        let mut state = self.state();
        state.random = state.random.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state.random;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1_u64 << 53) as f64
    }

    fn read(&self, reads: impl Fn(&mut State) -> &mut Reads, live: impl FnOnce() -> f64) -> f64 {
        let mut state = self.state();
        let total = state.times.values.len() + state.elapsed.values.len();
        let clock = reads(&mut state);
        if let Some(value) = clock.values.get(clock.read).copied() {
            clock.read += 1;
            return value;
        }
        let value = live();
        if total < MAX_RECORDED_READS {
            clock.values.push(value);
            clock.read += 1;
        } else {
            state.overflowed = true;
        }
        value
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_reads_what_the_record_holds_then_goes_on_live() {
        let first = Entropy::default();
        let randoms: Vec<f64> = (0..5).map(|_| first.random()).collect();
        let times = [first.now_ms(), first.now_ms()];
        let elapsed = first.elapsed_ms(|| 7.0);
        let record = first.record();
        assert!(record.complete);
        assert_eq!(record.times, times);
        assert_eq!(record.elapsed, [elapsed]);
        assert!(randoms.iter().all(|value| (0.0..1.0).contains(value)));

        let again = Entropy::replaying(&record);
        assert_eq!((0..5).map(|_| again.random()).collect::<Vec<_>>(), randoms);
        assert_eq!([again.now_ms(), again.now_ms()], times);
        assert_eq!(again.elapsed_ms(|| 99.0), 7.0);
        // Past the record: live, and recorded in turn.
        assert_eq!(again.elapsed_ms(|| 99.0), 99.0);
        assert_eq!(again.record().elapsed, [7.0, 99.0]);
    }

    #[test]
    fn reads_past_the_bound_leave_the_record_incomplete() {
        let entropy = Entropy::default();
        for _ in 0..MAX_RECORDED_READS {
            entropy.elapsed_ms(|| 1.0);
        }
        assert!(entropy.record().complete);
        entropy.now_ms();
        let record = entropy.record();
        assert!(!record.complete);
        assert_eq!(
            record.elapsed.len() + record.times.len(),
            MAX_RECORDED_READS
        );
    }

    #[test]
    fn two_fresh_sources_draw_different_numbers() {
        assert_ne!(Entropy::default().random(), Entropy::default().random());
    }
}
