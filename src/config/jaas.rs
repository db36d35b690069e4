//! `sasl.jaas.config` as Kafka reads it: one login module entry, `<class> <flag>
//! key=value ... ;`, values bare words or double-quoted strings. Messages never quote the
//! text, which holds a password.

use std::collections::BTreeMap;

/// One parsed JAAS entry.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Jaas {
    /// The login module's class name (`org.apache.kafka.common.security.plain.PlainLoginModule`).
    pub module: String,
    /// Its options (`username`, `password`, ...).
    pub options: BTreeMap<String, String>,
}

pub(crate) fn parse(text: &str) -> Result<Jaas, String> {
    let tokens = tokens(text)?;
    let mut it = tokens.into_iter().peekable();
    let module = match it.next() {
        Some(Token::Word(w)) => w,
        _ => return Err("it does not start with a login module class".into()),
    };
    match it.next() {
        Some(Token::Word(flag))
            if ["required", "requisite", "sufficient", "optional"].contains(&flag.as_str()) => {}
        _ => {
            return Err(
                "the login module class must be followed by a control flag such as `required`"
                    .into(),
            )
        }
    }
    let mut options = BTreeMap::new();
    loop {
        match it.next() {
            Some(Token::Semicolon) => break,
            Some(Token::Word(key)) => {
                if it.next() != Some(Token::Equals) {
                    return Err(format!("option `{key}` has no `=`"));
                }
                match it.next() {
                    Some(Token::Word(v) | Token::Quoted(v)) => {
                        options.insert(key, v);
                    }
                    _ => return Err(format!("option `{key}` has no value")),
                }
            }
            None => return Err("it does not end with `;`".into()),
            Some(_) => return Err("expected an option `key=value` or `;`".into()),
        }
    }
    if it.peek().is_some() {
        return Err("it holds more than one login module entry".into());
    }
    Ok(Jaas { module, options })
}

#[derive(Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Equals,
    Semicolon,
}

fn tokens(text: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '=' => out.push(Token::Equals),
            ';' => out.push(Token::Semicolon),
            '"' => {
                let mut value = String::new();
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(escaped) => value.push(escaped),
                            None => return Err("a quoted value is not closed".into()),
                        },
                        Some(c) => value.push(c),
                        None => return Err("a quoted value is not closed".into()),
                    }
                }
                out.push(Token::Quoted(value));
            }
            c => {
                let mut word = String::from(c);
                while let Some(&next) = chars.peek() {
                    if next.is_whitespace() || matches!(next, '=' | ';' | '"') {
                        break;
                    }
                    word.push(next);
                    chars.next();
                }
                out.push(Token::Word(word));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kafka_s_examples() {
        let jaas = parse(
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="a;b \"c\"";"#,
        )
        .unwrap();
        assert_eq!(
            jaas.module,
            "org.apache.kafka.common.security.scram.ScramLoginModule"
        );
        assert_eq!(jaas.options["username"], "alice");
        assert_eq!(jaas.options["password"], r#"a;b "c""#);
        let jaas = parse(
            "org.apache.kafka.common.security.plain.PlainLoginModule required\n  username=bob\n  password=pw ;",
        )
        .unwrap();
        assert_eq!(jaas.options["username"], "bob");
        assert_eq!(jaas.options["password"], "pw");
    }

    #[test]
    fn malformed_entries_are_refused_without_quoting_the_text() {
        for bad in [
            "",
            "Module",
            "Module required username=\"alice\" password=\"s3cret\"",
            "Module maybe password=\"s3cret\";",
            "Module required password;",
            "Module required password=\"s3cret;",
            "Module required password=\"s3cret\"; Other required;",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(!e.contains("s3cret"), "{bad}: {e}");
        }
    }
}
