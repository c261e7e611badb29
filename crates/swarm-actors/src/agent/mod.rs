//! What an agent's own commands do: send a draft, take and finish work, print
//! what was taken, answer a clarify, stamp artifacts, record the task
//! document a taken item names and the role byline of a commit.

pub mod artifacts;
pub mod byline;
pub mod caller;
pub mod guard;
pub mod ingest;
pub mod mailbox;
pub mod place;
pub mod printout;
pub mod queue;
pub mod send;
pub mod task_doc;
pub mod wait;
