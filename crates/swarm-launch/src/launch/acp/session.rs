//! Opening the role's session (docs/agents.md, "The ACP runtime", 2):
//! `initialize` offering no file system and no terminal, then
//! `session/load` of the session kept for the role where the agent can
//! load sessions, else (or when the load fails, said in the activity)
//! `session/new` in the role's worktree; then the session's mode, where
//! the role's permission needs one.
//!
//! The invariants: an agent speaking another protocol version is
//! refused; a session id the agent names is kept only when it is a valid
//! id (agent_session.rs), so nothing the agent says becomes a path.

use super::*;

impl Client<'_> {
    /// `initialize`, then the role's session: loaded again where the agent
    /// can and one was kept, else a new one in the role's worktree; then
    /// its mode, where the permission needs one.
    pub(super) fn start(
        &mut self,
        cli: Cli,
        setup: &Setup,
        say: &mut dyn FnMut(&str),
    ) -> Result<()> {
        let init = self.initialize(say)?;
        let kept = agent_session::read(&self.plan.project, self.role(), cli);
        let can_load = init["agentCapabilities"]["loadSession"] == true;
        let loaded = match kept.filter(|_| can_load) {
            Some(old) => self.load(&old, setup, say),
            None => false,
        };
        if !loaded {
            self.new_session(cli, setup, say)?;
        }
        if let Some(mode) = setup.mode {
            let id = self
                .conn
                .request(
                    "session/set_mode",
                    json!({"sessionId": self.session, "modeId": mode}),
                )
                .map_err(|e| self.io(e))?;
            self.wait_for(id, &format!("session/set_mode {mode}"), say)?;
            say(&format!("{}: session mode {mode}", self.role()));
        }
        Ok(())
    }

    /// `initialize`: the agent's answer, refused unless it speaks
    /// [`PROTOCOL_VERSION`].
    fn initialize(&mut self, say: &mut dyn FnMut(&str)) -> Result<Value> {
        let id = self
            .conn
            .request(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL_VERSION,
                    "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false},
                    "clientInfo": {"name": "swarm-handoff", "version": env!("CARGO_PKG_VERSION")},
                }),
            )
            .map_err(|e| self.io(e))?;
        let init = self.wait_for(id, "initialize", say)?;
        if init["protocolVersion"].as_u64() != Some(PROTOCOL_VERSION) {
            return Err(Error::process(format!(
                "the agent of role {} speaks ACP version {}; this client speaks {PROTOCOL_VERSION}",
                self.role(),
                crate::text::escape(
                    &init["protocolVersion"]
                        .to_string()
                        .chars()
                        .take(20)
                        .collect::<String>()
                )
            )));
        }
        Ok(init)
    }

    /// `session/load` of `old`: true when the agent loaded it; else the
    /// activity says why and a new session starts.
    fn load(&mut self, old: &str, setup: &Setup, say: &mut dyn FnMut(&str)) -> bool {
        let cwd = self.r.worktree_path.display().to_string();
        let params = with_meta(
            json!({"sessionId": old, "cwd": cwd, "mcpServers": []}),
            &setup.meta,
        );
        // The replayed conversation is not this run's activity: no turn
        // runs, so its updates are not recorded.
        self.session = old.to_string();
        let loaded = self
            .conn
            .request("session/load", params)
            .map_err(|e| self.io(e))
            .and_then(|id| self.wait_for(id, "session/load", say));
        let line = match loaded {
            Ok(_) => {
                self.loaded = true;
                format!("session {old} loaded again")
            }
            Err(e) => format!("the agent could not load session {old} ({e}); a new session starts"),
        };
        say(&format!("{}: {line}", self.role()));
        self.rec.note(&line);
        self.loaded
    }

    /// `session/new` in the role's worktree, its id kept for the role.
    fn new_session(&mut self, cli: Cli, setup: &Setup, say: &mut dyn FnMut(&str)) -> Result<()> {
        let cwd = self.r.worktree_path.display().to_string();
        let id = self
            .conn
            .request(
                "session/new",
                with_meta(json!({"cwd": cwd, "mcpServers": []}), &setup.meta),
            )
            .map_err(|e| self.io(e))?;
        let got = self.wait_for(id, "session/new", say)?;
        let sid = got["sessionId"].as_str().unwrap_or_default().to_string();
        if !agent_session::valid(&sid) {
            return Err(Error::process(format!(
                "the agent of role {} named its session {:?}: not a session id",
                self.role(),
                crate::text::escape(&sid.chars().take(80).collect::<String>())
            )));
        }
        agent_session::write(&self.plan.project, self.role(), cli, &sid)?;
        say(&format!("{}: session {sid} opened in {cwd}", self.role()));
        self.session = sid;
        Ok(())
    }
}
