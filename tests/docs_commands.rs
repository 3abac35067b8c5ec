//! The docs' commands run as written: every `cargo run ... --example NAME` in the README, the
//! crate's sources and the examples names an example that exists, with features that enable
//! its `required-features` (`full` counted as the features it lists); and the README's quick
//! start is `examples/quickstart.rs` word for word, so that the text a reader copies is the one
//! `scripts/test-all` builds (clippy `--all-targets`) and runs as a smoke run. No command is
//! run here: reading the files is enough, and costs nothing.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

/// The manifest's `[[example]]` names and their required features, and the `full` feature's
/// list.
fn manifest() -> (BTreeMap<String, Vec<String>>, Vec<String>) {
    let text = fs::read_to_string("Cargo.toml").unwrap();
    let list = |line: &str| -> Vec<String> {
        let inner = line.split_once('[').unwrap().1.split_once(']').unwrap().0;
        inner
            .split(',')
            .map(|f| f.trim().trim_matches('"').to_owned())
            .filter(|f| !f.is_empty())
            .collect()
    };
    let mut examples = BTreeMap::new();
    let mut full = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            current = None;
        }
        if line == "[[example]]" {
            current = Some(String::new());
        } else if let (Some(name), true) = (&mut current, line.starts_with("name = ")) {
            *name = line["name = ".len()..].trim_matches('"').to_owned();
            examples.insert(name.clone(), Vec::new());
        } else if let (Some(name), true) = (&current, line.starts_with("required-features")) {
            examples.insert(name.clone(), list(line));
        } else if line.starts_with("full = [") {
            full = list(line);
        }
    }
    (examples, full)
}

/// Every file of the docs: the README, the sources, the examples.
fn documents() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs" || e == "md") {
                out.push((
                    path.display().to_string(),
                    fs::read_to_string(&path).unwrap(),
                ));
            }
        }
    }
    let mut out = vec![(
        "README.md".to_owned(),
        fs::read_to_string("README.md").unwrap(),
    )];
    walk(Path::new("src"), &mut out);
    walk(Path::new("examples"), &mut out);
    out
}

#[test]
fn every_example_command_names_an_example_and_its_features() {
    let (examples, full) = manifest();
    assert!(examples.contains_key("quickstart") && !full.is_empty());
    let mut checked = 0;
    for (file, text) in documents() {
        for line in text.lines() {
            let Some(at) = line.find("cargo run") else {
                continue;
            };
            let command: Vec<&str> = line[at..]
                .split(|c: char| c.is_whitespace() || c == '`')
                .take_while(|word| *word != "--" && *word != "#")
                .filter(|word| !word.is_empty())
                .collect();
            let Some(name) = command
                .iter()
                .position(|w| *w == "--example")
                .map(|i| command[i + 1])
            else {
                continue;
            };
            let mut features: Vec<String> = command
                .iter()
                .position(|w| *w == "--features")
                .map(|i| command[i + 1].split(',').map(str::to_owned).collect())
                .unwrap_or_default();
            if features.iter().any(|f| f == "full") {
                features.extend(full.iter().cloned());
            }
            let required = examples
                .get(name)
                .unwrap_or_else(|| panic!("{file}: `{line}` names no example {name:?}"));
            let exists = Path::new(&format!("examples/{name}.rs")).exists()
                || Path::new(&format!("examples/{name}/main.rs")).exists();
            assert!(exists, "{file}: `{line}`: no examples/{name}.rs");
            for feature in required {
                assert!(
                    features.contains(feature),
                    "{file}: `{line}` lacks feature {feature:?} of example {name:?}"
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "{checked} commands");
}

#[test]
fn the_readme_quick_start_is_the_example_word_for_word() {
    let readme = fs::read_to_string("README.md").unwrap();
    let example = fs::read_to_string("examples/quickstart.rs").unwrap();
    let start = readme
        .find("```rust,ignore\n")
        .expect("the quick start's block")
        + 15;
    let end = start + readme[start..].find("```\n").unwrap();
    assert_eq!(&readme[start..end], example);
    // No line a rendered page would show that the compiler does not see, or the reverse.
    assert!(!example.lines().any(|l| l.trim_start().starts_with("# ")));
    // The features line names every feature the example needs.
    let features = readme
        .lines()
        .find(|l| l.starts_with("shared-headers = { path"))
        .unwrap();
    for feature in ["axum", "tracing", "opentelemetry"] {
        assert!(features.contains(&format!("\"{feature}\"")), "{features}");
    }
}
