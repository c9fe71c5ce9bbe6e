//! A sandbox made before the run it serves is known: a runtime and context that no code has
//! run in yet, with the engine's globals, the stack hook and the host API that is the same for
//! every run. Its host functions read the run from the sandbox's [`SessionSlot`], so the run's
//! own pieces (session, limits, tools, `input`) are bound by `engine` when the run starts.
//!
//! A spare serves exactly one run and is discarded after it: nothing one run does can be seen
//! by another. Making one is most of a fresh sandbox's cost (the context alone is ~60 µs),
//! which is why warm threads (see `warm`) make theirs while no run waits.

use rquickjs::{CatchResultExt, Context, Runtime};

use crate::session::SessionSlot;
use crate::stack::{self, StackHook};
use crate::{convert, globals};

/// Fields drop in order: the hook's handle on the engine and the context before the runtime.
pub(crate) struct Spare {
    _stack_hook: StackHook,
    pub context: Context,
    pub runtime: Runtime,
    /// Shared with every host function of the context.
    pub slot: SessionSlot,
}

impl Spare {
    /// A new sandbox without limits, made for a run that is waiting for it; `Err` says why
    /// the engine could not make one.
    pub fn new() -> Result<Spare, String> {
        Spare::new_between_steps(|| {})
    }

    /// [`Spare::new`], calling `between_steps` after each of its longer steps (~10-60 µs).
    pub fn new_between_steps(mut between_steps: impl FnMut()) -> Result<Spare, String> {
        let runtime = Runtime::new().map_err(|error| error.to_string())?;
        between_steps();
        let context = Context::full(&runtime).map_err(|error| error.to_string())?;
        between_steps();
        let slot = SessionSlot::default();
        let stack_hook = context.with(|ctx| {
            let installed = stack::install_stack_hook(&ctx, &slot)
                .and_then(|hook| globals::install(&ctx, &slot).map(|()| hook));
            installed
                .catch(&ctx)
                .map_err(|caught| convert::caught_text(&ctx, caught))
        })?;
        Ok(Spare {
            _stack_hook: stack_hook,
            context,
            runtime,
            slot,
        })
    }
}
