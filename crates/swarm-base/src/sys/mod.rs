//! The system underneath: what any layer may call and what knows nothing of
//! the mail protocol. Log files that rotate (`logfile`) and reading one
//! from an offset (`log_reader`), waiting for folder changes (`watch`), the one way to call tmux (`tmux`) and git (`git`),
//! waiting for a child bounded in time and output (`child`),
//! the hooks the swarm writes into a repository (`git_hooks`), a loose
//! git object judged by its content (`git_object`),
//! tokens from the kernel (`random`), quoting for `sh` (`shell`), the
//! priority of threads that work for later (`background`) and freed memory
//! given back (`memory`). Renames, fsyncs
//! and locks stay in `crate::fsx`.

pub mod account;
pub mod background;
pub mod child;
pub mod git;
pub mod git_hooks;
pub mod git_object;
pub mod log_reader;
pub mod logfile;
pub mod memory;
pub mod random;
pub mod shell;
pub mod tmux;
pub mod watch;
