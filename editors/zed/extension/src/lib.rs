//! Registers `jaxlsp serve` as a Python language server in Zed: the binary comes from
//! `lsp.jaxlsp.binary` in the settings, else `jaxlsp` on the worktree's PATH.
use zed_extension_api::{self as zed, settings::LspSettings, LanguageServerId, Result};

struct Jaxlsp;

impl zed::Extension for Jaxlsp {
    fn new() -> Self {
        Jaxlsp
    }

    fn language_server_command(&mut self, _id: &LanguageServerId, worktree: &zed::Worktree) -> Result<zed::Command> {
        let binary = LspSettings::for_worktree("jaxlsp", worktree).ok().and_then(|s| s.binary);
        let path = binary.as_ref().and_then(|b| b.path.clone()).or_else(|| worktree.which("jaxlsp"));
        let command = path.ok_or("jaxlsp is not on PATH: pip install jaxlsp, or set lsp.jaxlsp.binary.path")?;
        let args = binary.and_then(|b| b.arguments).unwrap_or_else(|| vec!["serve".into()]);
        Ok(zed::Command { command, args, env: worktree.shell_env() })
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
