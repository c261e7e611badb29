//! `swarm mcp`: an MCP server over stdio, one per agent, acting as one role.
//! The tools (`tools`) are synchronous library calls on the same files and
//! locks as the shell commands; this module only speaks the protocol, through
//! the official SDK (rmcp), and runs each call off the runtime
//! (`spawn_blocking`), so a waiting `next` never stalls the connection. The
//! server holds no state: killing it loses nothing.

pub mod args;
pub mod tools;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};

use crate::error::{Error, Result};
pub use tools::Agent;

/// What the server tells the client once, at `initialize`.
const INSTRUCTIONS: &str = "Swarm handoff tools: call next to take work (it waits for some), done when finished, send/reply/ask to talk to other roles.";

struct Server {
    agent: Arc<Agent>,
    tools: Arc<Vec<Tool>>,
}

/// The tool definitions as `tools/list` sends them.
pub fn tool_list() -> Vec<Tool> {
    tools::definitions()
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "swarm-handoff",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if tools::find(&name).is_none() {
            return Err(ErrorData::invalid_params(
                format!("unknown tool '{}'", crate::text::escape(&name)),
                None,
            ));
        }
        let agent = self.agent.clone();
        let args = request.arguments;
        let outcome =
            tokio::task::spawn_blocking(move || tools::call(&agent, &name, args.as_ref())).await;
        let result = match outcome {
            Ok(Ok(v)) => CallToolResult::structured(v),
            // A refusal is a tool error the model reads: the CLI's text, then
            // the CLI's --json object.
            Ok(Err(r)) => {
                let mut res = CallToolResult::structured_error(r.json);
                res.content = vec![rmcp::model::ContentBlock::text(r.text)];
                res
            }
            Err(e) => {
                return Err(ErrorData::internal_error(
                    format!("tool call failed: {e}"),
                    None,
                ))
            }
        };
        Ok(result.into())
    }
}

/// Serves MCP on stdin/stdout as `agent` until the client closes the
/// connection. Checks first that the role works here, so a misconfigured
/// server fails at start with the CLI's message instead of on every call.
pub fn serve(agent: Agent) -> Result<()> {
    crate::agent::place::resolve_as(&agent.cwd, &agent.role)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::internal(format!("swarm mcp: cannot start the runtime: {e}")))?;
    rt.block_on(async move {
        let server = Server {
            agent: Arc::new(agent),
            tools: Arc::new(tool_list()),
        };
        let running = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| Error::internal(format!("swarm mcp: {e}")))?;
        running
            .waiting()
            .await
            .map_err(|e| Error::internal(format!("swarm mcp: {e}")))?;
        Ok(())
    })
}
