# Sourced by the scripts that install tools for the checks (validators, buf, cargo-machete, the
# MCP servers): the one folder they install into, outside the clone so that every clone on the
# machine shares one install. Each tool sits in a folder named after its pinned version, so a
# new pin installs anew and nothing stale is used. AGENTIC_TOOLS_DIR moves it.
tools_dir="${AGENTIC_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentic/tools}"
mkdir -p "$tools_dir"

# Runs its arguments (an install) holding the tools folder's lock, so that two runs at once
# never install into one folder together.
with_tools_lock() {
    (
        flock 9
        "$@"
    ) 9>"$tools_dir/.lock"
}
