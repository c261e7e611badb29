//! The picture of the crates in docs/design.md ("The crates are the
//! layers") is the workspace as it is: each row's modules are the `pub mod`
//! lines of that crate's `lib.rs`, and its imports are the `swarm-*`
//! dependencies of its `Cargo.toml`. The compiler keeps the imports pointing
//! down; this keeps the page that a newcomer reads first saying so.

use std::collections::BTreeSet;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The backticked names of one table cell: "`a`, `b`" -> {a, b}.
fn names(cell: &str) -> BTreeSet<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The rows of the crates table: crate -> (modules, imports).
fn documented() -> Vec<(String, BTreeSet<String>, BTreeSet<String>)> {
    let doc = std::fs::read_to_string(root().join("docs/design.md")).unwrap();
    let section = doc
        .split("## The crates are the layers")
        .nth(1)
        .expect("docs/design.md has a section \"The crates are the layers\"");
    let mut rows = Vec::new();
    for line in section.lines().skip_while(|l| !l.starts_with("| Crate")) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (name, modules, imports) = (cells[1], cells[2], cells[4]);
        if !name.starts_with('`') {
            continue;
        }
        let name = name.trim_matches('`').to_string();
        let imports = if imports == "every crate above" {
            rows.iter()
                .map(|(n, _, _): &(String, _, _)| n.clone())
                .collect()
        } else {
            names(imports)
        };
        rows.push((name, names(modules), imports));
    }
    rows
}

/// What the workspace says of one crate: its modules and its imports.
fn actual(krate: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let dir = if krate == "swarm-handoff" {
        root().to_path_buf()
    } else {
        root().join("crates").join(krate)
    };
    let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
    let modules = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';').to_string())
        .collect();
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let deps = manifest
        .split("\n[dependencies]\n")
        .nth(1)
        .unwrap_or_default()
        .split("\n[")
        .next()
        .unwrap_or_default();
    let imports = deps
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with("swarm-"))
        .map(str::to_string)
        .collect();
    (modules, imports)
}

#[test]
fn the_crates_table_in_design_md_is_the_workspace() {
    let rows = documented();
    let listed: BTreeSet<String> = rows.iter().map(|(n, _, _)| n.clone()).collect();
    let mut on_disk: BTreeSet<String> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.insert("swarm-handoff".into());
    assert_eq!(listed, on_disk, "docs/design.md's crates against crates/");
    for (i, (name, modules, imports)) in rows.iter().enumerate() {
        let (real_modules, real_imports) = actual(name);
        assert_eq!(
            *modules, real_modules,
            "{name}: the modules docs/design.md lists against src/lib.rs"
        );
        assert_eq!(
            *imports, real_imports,
            "{name}: the imports docs/design.md lists against Cargo.toml"
        );
        // Listed in order: a crate imports only rows above its own.
        let above: BTreeSet<String> = rows[..i].iter().map(|(n, _, _)| n.clone()).collect();
        assert!(
            imports.is_subset(&above),
            "{name} imports a crate listed after it: {:?}",
            imports.difference(&above).collect::<Vec<_>>()
        );
    }
}
