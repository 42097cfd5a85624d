//! Registers `jaxlsp serve` as a Python language server in Zed: the binary comes from
//! `lsp.jaxlsp.binary` in the settings, else `jaxlsp` on the worktree's PATH.
//!
//! Nothing of the project may run before the user trusts it: a binary that lies inside the
//! worktree (its `.venv`, or a path a project's `.zed/settings.json` names) is refused, a
//! `python -m jaxlsp` command runs isolated (`-I`), and no `PYTHON*` variable of the project's
//! shell environment (direnv) reaches the server.
use std::path::Path;
use zed_extension_api::{self as zed, settings::LspSettings, LanguageServerId, Result};

struct Jaxlsp;

/// `-I` before `-m jaxlsp` when the arguments run the module without it: Python would put the
/// current folder (the project) first on `sys.path`.
fn isolated(mut args: Vec<String>) -> Vec<String> {
    if let Some(at) = args.iter().position(|a| a == "-m") {
        if args.get(at + 1).map(String::as_str) == Some("jaxlsp") && !args[..at].iter().any(|a| a == "-I") {
            args.insert(0, "-I".into());
        }
    }
    args
}

impl zed::Extension for Jaxlsp {
    fn new() -> Self {
        Jaxlsp
    }

    fn language_server_command(&mut self, _id: &LanguageServerId, worktree: &zed::Worktree) -> Result<zed::Command> {
        let binary = LspSettings::for_worktree("jaxlsp", worktree).ok().and_then(|s| s.binary);
        let configured = binary.as_ref().and_then(|b| b.path.clone());
        let path = match configured {
            Some(path) if path.contains('/') => Some(path),
            Some(name) => worktree.which(&name),
            None => worktree.which("jaxlsp"),
        };
        let command = path.ok_or("jaxlsp is not on PATH: pip install jaxlsp, or set lsp.jaxlsp.binary.path")?;
        let root = worktree.root_path();
        if !Path::new(&command).is_absolute() || Path::new(&command).starts_with(&root) {
            return Err(format!(
                "jaxlsp: not started: {command} lies inside the project {root}, whose code must not run before you \
                 trust it; install jaxlsp outside the project (pipx install jaxlsp)"
            ));
        }
        let args = isolated(binary.and_then(|b| b.arguments).unwrap_or_else(|| vec!["serve".into()]));
        let env = worktree.shell_env().into_iter().filter(|(key, _)| !key.starts_with("PYTHON")).collect();
        Ok(zed::Command { command, args, env })
    }

    fn language_server_initialization_options(
        &mut self,
        _id: &LanguageServerId,
        worktree: &zed::Worktree,
    ) -> Result<Option<zed::serde_json::Value>> {
        Ok(LspSettings::for_worktree("jaxlsp", worktree).ok().and_then(|s| s.initialization_options))
    }
}

zed::register_extension!(Jaxlsp);
