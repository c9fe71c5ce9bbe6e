//! The engine: what runs prompts and carries their events, under every use case. The runner
//! (`runner`) with its admission limits (`admission`), budgets (`budget`) and the bounds on a
//! caller's state (`state`) and output schema (`answers`); the live fan-out of stored events (`hub`) and the gap-free
//! streams that follow them (`follow`); the mode registry (`modes`); and the loops of the
//! engine and the store alone (`background`).
//!
//! Arrows run down only: the engine uses the store (`crate::store`) and the crate's shared
//! modules (errors, ids, metrics); it knows no use case (`crate::app`) and no API
//! (`crate::api`).

pub(crate) mod admission;
pub(crate) mod answers;
pub(crate) mod background;
pub(crate) mod budget;
pub(crate) mod follow;
pub(crate) mod hub;
#[cfg(test)]
mod log_properties;
pub(crate) mod modes;
pub(crate) mod runner;
pub(crate) mod state;
