//! The built-in plugins and the names `--plugins` enables them by.

mod artifact;
mod demo;
mod human;
pub mod interpreter;
mod memory;
mod skill;
mod trigger;

use std::sync::Arc;

use agentic_rpc::InternalChannel;

pub use artifact::ArtifactPlugin;
pub use demo::DemoPlugin;
pub use human::HumanPlugin;
pub use interpreter::InterpreterPlugin;
pub use memory::MemoryPlugin;
pub use skill::SkillPlugin;
pub use trigger::TriggerPlugin;

use crate::error::Error;
use crate::folders::Folders;
use crate::plugin::Plugin;
use crate::store::Store;

/// Every plugin name `--plugins` accepts.
pub const KNOWN_PLUGINS: &[&str] = &[
    "artifact",
    "demo",
    "human",
    "interpreter",
    "memory",
    "skill",
    "trigger",
];

/// A built-in plugin, named but not yet built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltIn {
    Artifact,
    Demo,
    Human,
    Interpreter,
    Memory,
    Skill,
    Trigger,
}

impl BuiltIn {
    /// The plugins named in `names`, in that order. Blank names and repeats are skipped; an
    /// unknown name is an error that names it. Checked before anything is opened, so a typo
    /// in the configuration leaves no trace.
    pub fn parse_list(names: &[String]) -> Result<Vec<BuiltIn>, Error> {
        let mut plugins = Vec::new();
        for name in names
            .iter()
            .map(|name| name.trim())
            .filter(|name| !name.is_empty())
        {
            let plugin = match name {
                "artifact" => BuiltIn::Artifact,
                "demo" => BuiltIn::Demo,
                "human" => BuiltIn::Human,
                "interpreter" => BuiltIn::Interpreter,
                "memory" => BuiltIn::Memory,
                "skill" => BuiltIn::Skill,
                "trigger" => BuiltIn::Trigger,
                _ => {
                    return Err(Error::UnknownPlugin {
                        name: name.to_owned(),
                        known: KNOWN_PLUGINS.join(", "),
                    });
                }
            };
            if !plugins.contains(&plugin) {
                plugins.push(plugin);
            }
        }
        Ok(plugins)
    }

    /// Builds the plugin. `services` are the (lazily connecting) channels to the other
    /// services some plugins call.
    pub fn build(self, store: &Store, folders: &Folders, services: &Services) -> Arc<dyn Plugin> {
        match self {
            BuiltIn::Artifact => Arc::new(ArtifactPlugin::new(store.clone())),
            BuiltIn::Demo => Arc::new(DemoPlugin::new(store.clone())),
            BuiltIn::Human => Arc::new(HumanPlugin),
            BuiltIn::Interpreter => Arc::new(InterpreterPlugin),
            BuiltIn::Memory => Arc::new(MemoryPlugin::new(
                store.memory(),
                services.memory_put_approval,
            )),
            BuiltIn::Skill => Arc::new(SkillPlugin::new(store.skills(), folders.clone())),
            BuiltIn::Trigger => Arc::new(TriggerPlugin::new(services.gateway.clone())),
        }
    }
}

/// The other agentic services plugins call: only the gateway, where the trigger plugin
/// manages the caller's triggers (the one call up the service graph, see ARCHITECTURE.md).
/// Code the interpreter and skills run is run by the calling executor.
pub struct Services {
    pub gateway: InternalChannel,
    /// Whether `memory.put` needs the user's approval (`--memory-put-approval`).
    pub memory_put_approval: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn plugin_lists_skip_blanks_and_repeats() -> Result<(), Error> {
        let parsed = BuiltIn::parse_list(&names(&["demo", " artifact ", "", "demo"]))?;
        assert_eq!(parsed, [BuiltIn::Demo, BuiltIn::Artifact]);
        Ok(())
    }

    #[test]
    fn an_unknown_plugin_is_named_in_the_error() {
        let error = BuiltIn::parse_list(&names(&["artifact", "weather"])).err();
        let message = error.map(|error| error.to_string()).unwrap_or_default();
        assert_eq!(
            message,
            "unknown plugin: \"weather\" (known plugins: artifact, demo, human, interpreter, memory, skill, trigger)"
        );
    }
}
