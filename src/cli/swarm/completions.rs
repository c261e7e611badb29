//! `swarm completions <shell> [--bin NAME]`: shell completion scripts for
//! every binary, generated from their clap definitions.

use clap_complete::Shell;

use crate::error::{exit, Error};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Prints the completion script of every binary (swarm, swarm-handoff, ready-next, \
done-current, handoffd) for SHELL, one after another, ready to be sourced; \
--bin NAME prints only that binary's (for a zsh fpath file `_NAME`).
  bash:  swarm completions bash > ~/.local/share/bash-completion/completions/swarm
  zsh:   for b in swarm swarm-handoff ready-next done-current handoffd; do
           swarm completions zsh --bin $b > ~/.zfunc/_$b; done   # ~/.zfunc on fpath
  fish:  swarm completions fish > ~/.config/fish/completions/swarm.fish")]
pub struct Args {
    /// The shell to complete for
    #[arg(value_enum)]
    pub shell: Shell,
    /// Only this binary's script
    #[arg(long, value_name = "NAME")]
    pub bin: Option<String>,
}

/// The script text for `shell`, for one binary or all of them.
pub fn script(shell: Shell, bin: Option<&str>) -> crate::error::Result<String> {
    let mut all = crate::cli::commands();
    if let Some(b) = bin {
        all.retain(|c| c.get_name() == b);
        if all.is_empty() {
            let names: Vec<String> = crate::cli::commands()
                .iter()
                .map(|c| c.get_name().to_string())
                .collect();
            return Err(Error::bad_input(format!(
                "no binary named '{}'\n  hint: one of {}",
                crate::text::escape(b),
                names.join(", ")
            )));
        }
    }
    let mut buf = Vec::new();
    for mut cmd in all {
        let name = cmd.get_name().to_string();
        clap_complete::generate(shell, &mut cmd, name, &mut buf);
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

pub fn run(args: Args) -> i32 {
    match script(args.shell, args.bin.as_deref()) {
        Ok(s) => {
            crate::cli::out(&s);
            exit::OK
        }
        Err(e) => crate::cli::report(&e, false),
    }
}
