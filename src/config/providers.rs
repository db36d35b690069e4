//! Kafka's config providers in `mm2.properties`, so that a file that keeps its secrets
//! elsewhere works unchanged: `config.providers = file, env, directory`, each
//! `config.providers.<name>.class` one of Kafka's three, and `${<name>:[<path>:]<key>}` in any
//! value replaced by what the provider finds:
//!
//! * `FileConfigProvider`: `${file:/etc/kafka/secrets.properties:password}`, the key's value in
//!   that properties file;
//! * `EnvVarConfigProvider`: `${env:MIRROR_PASSWORD}`, the environment variable;
//! * `DirectoryConfigProvider`: `${directory:/run/secrets:password}`, the content of the file
//!   `password` in that directory (Kubernetes secret volumes).
//!
//! A reference that cannot be resolved is an error naming the line and the key, never the
//! value found. `${...}` naming no declared provider is left as written, as Kafka does.

use std::collections::HashMap;

use super::properties::{lex, Entry};

/// The providers Kafka ships, by class name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Provider {
    File,
    Env,
    Directory,
}

const CLASSES: &[(&str, Provider)] = &[
    (
        "org.apache.kafka.common.config.provider.FileConfigProvider",
        Provider::File,
    ),
    (
        "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
        Provider::Env,
    ),
    (
        "org.apache.kafka.common.config.provider.DirectoryConfigProvider",
        Provider::Directory,
    ),
];

/// Why a provider setting or reference failed: the line and the message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ProviderError {
    pub line: usize,
    pub key: String,
    pub message: String,
}

/// Takes the `config.providers*` entries out of `entries` and resolves every `${...}`
/// reference to a declared provider in the others' values. Returns the keys of provider
/// parameters (`config.providers.<name>.param.*`) strait does not act on, for warnings.
pub(crate) fn resolve(
    entries: &mut Vec<Entry>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Vec<Entry>, ProviderError> {
    let (settings, rest): (Vec<Entry>, Vec<Entry>) = std::mem::take(entries)
        .into_iter()
        .partition(|e| e.key == "config.providers" || e.key.starts_with("config.providers."));
    *entries = rest;
    let Some(declared) = settings.iter().rev().find(|e| e.key == "config.providers") else {
        return Ok(settings);
    };
    let mut providers = HashMap::new();
    for name in declared
        .value
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
    {
        let class_key = format!("config.providers.{name}.class");
        let Some(class) = settings.iter().rev().find(|e| e.key == class_key) else {
            return Err(ProviderError {
                line: declared.line,
                key: declared.key.clone(),
                message: format!("provider `{name}` has no {class_key}"),
            });
        };
        let Some(&(_, provider)) = CLASSES.iter().find(|(c, _)| *c == class.value) else {
            return Err(ProviderError {
                line: class.line,
                key: class.key.clone(),
                message: format!(
                    "`{}` is not a provider strait has: FileConfigProvider, \
                     EnvVarConfigProvider or DirectoryConfigProvider",
                    class.value
                ),
            });
        };
        providers.insert(name.to_string(), provider);
    }
    for e in entries.iter_mut() {
        e.value = substitute(&e.value, &providers, &env).map_err(|message| ProviderError {
            line: e.line,
            key: e.key.clone(),
            message,
        })?;
    }
    Ok(settings
        .into_iter()
        .filter(|e| e.key.contains(".param."))
        .collect())
}

/// `value` with each `${name:[path:]key}` of a provider in `providers` replaced.
fn substitute(
    value: &str,
    providers: &HashMap<String, Provider>,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        let reference = &rest[start + 2..start + len];
        out.push_str(&rest[..start]);
        match lookup(reference, providers, env)? {
            Some(found) => out.push_str(&found),
            None => out.push_str(&rest[start..=start + len]),
        }
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// What `name:[path:]key` resolves to; `None` when `name` is no declared provider.
fn lookup(
    reference: &str,
    providers: &HashMap<String, Provider>,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, String> {
    let Some((name, rest)) = reference.split_once(':') else {
        return Ok(None);
    };
    let Some(provider) = providers.get(name) else {
        return Ok(None);
    };
    let (path, key) = rest.rsplit_once(':').unwrap_or(("", rest));
    let found = match provider {
        Provider::Env => {
            env(key).ok_or_else(|| format!("`${{{reference}}}`: no environment variable {key}"))?
        }
        Provider::File => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("`${{{reference}}}`: cannot read `{path}`: {e}"))?;
            let entries = lex(&text).map_err(|e| {
                format!(
                    "`${{{reference}}}`: `{path}` line {}: {}",
                    e.line, e.message
                )
            })?;
            entries
                .into_iter()
                .rev()
                .find(|e| e.key == key)
                .map(|e| e.value)
                .ok_or_else(|| format!("`${{{reference}}}`: `{path}` has no key `{key}`"))?
        }
        Provider::Directory => {
            if key.contains('/') || key == ".." {
                return Err(format!("`${{{reference}}}`: `{key}` is not a file name"));
            }
            let file = std::path::Path::new(path).join(key);
            std::fs::read_to_string(&file)
                .map_err(|e| format!("`${{{reference}}}`: cannot read `{}`: {e}", file.display()))?
        }
    };
    Ok(Some(found))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(text: &str) -> Vec<Entry> {
        lex(text).unwrap()
    }

    fn env(name: &str) -> Option<String> {
        (name == "MIRROR_PASSWORD").then(|| "from-env".to_string())
    }

    const DECLARE: &str = "config.providers = file, env, dir\n\
        config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider\n\
        config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\n\
        config.providers.dir.class = org.apache.kafka.common.config.provider.DirectoryConfigProvider\n";

    #[test]
    fn each_provider_resolves_its_references() {
        let dir = tempfile::tempdir().unwrap();
        let props = dir.path().join("secrets.properties");
        std::fs::write(&props, "user = alice\npassword = from-file\n").unwrap();
        std::fs::write(dir.path().join("token"), "from-directory").unwrap();
        let (p, d) = (props.display(), dir.path().display());
        let mut list = entries(&format!(
            "{DECLARE}\
             a = u=\"${{file:{p}:user}}\" p=\"${{file:{p}:password}}\";\n\
             b = ${{env:MIRROR_PASSWORD}}\n\
             c = ${{dir:{d}:token}}\n\
             d = ${{vault:secret/x:y}} stays\n"
        ));
        let params = resolve(&mut list, env).unwrap();
        assert!(params.is_empty());
        let values: Vec<(&str, &str)> = list
            .iter()
            .map(|e| (e.key.as_str(), e.value.as_str()))
            .collect();
        assert_eq!(
            values,
            [
                ("a", "u=\"alice\" p=\"from-file\";"),
                ("b", "from-env"),
                ("c", "from-directory"),
                ("d", "${vault:secret/x:y} stays"),
            ]
        );
    }

    #[test]
    fn without_declared_providers_nothing_is_replaced() {
        let mut list = entries("b = ${env:MIRROR_PASSWORD}\n");
        resolve(&mut list, env).unwrap();
        assert_eq!(list[0].value, "${env:MIRROR_PASSWORD}");
    }

    #[test]
    fn what_cannot_be_resolved_is_an_error_naming_the_line_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let props = dir.path().join("secrets.properties");
        std::fs::write(&props, "password = from-file\n").unwrap();
        let p = props.display();
        for (line, expected) in [
            (
                "x = ${env:NOPE}".to_string(),
                "no environment variable NOPE",
            ),
            (format!("x = ${{file:{p}:user}}"), "has no key `user`"),
            (
                "x = ${file:/nonexistent.properties:user}".to_string(),
                "cannot read",
            ),
            (
                "x = ${dir:/tmp:../etc/passwd}".to_string(),
                "is not a file name",
            ),
        ] {
            let mut list = entries(&format!("{DECLARE}{line}\n"));
            let e = resolve(&mut list, env).unwrap_err();
            assert_eq!((e.line, e.key.as_str()), (5, "x"), "{line}");
            assert!(e.message.contains(expected), "{line}: {}", e.message);
            assert!(!e.message.contains("from-file"), "{}", e.message);
        }
        let mut list =
            entries("config.providers = vault\nconfig.providers.vault.class = com.example.Vault\n");
        let e = resolve(&mut list, env).unwrap_err();
        assert_eq!(e.key, "config.providers.vault.class");
        let mut list = entries("config.providers = vault\n");
        assert!(resolve(&mut list, env)
            .unwrap_err()
            .message
            .contains("has no config.providers.vault.class"));
    }
}
