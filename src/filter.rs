//! Topic and consumer-group selection: `TopicFilter` and `GroupFilter`, strait's versions of
//! MirrorMaker 2's `DefaultTopicFilter` and `DefaultGroupFilter`.
//!
//! MM2 reads `topics`/`topics.exclude` (and `groups`/`groups.exclude`) as comma-separated
//! lists of Java regexes, joins each list with `|` and tests names with
//! `Pattern.matcher(name).matches()`: a *full* match. strait compiles each list item on its
//! own, anchored as `^(?:item)$`, which selects the same names. An empty include list selects
//! nothing (MM2: "a blank config property should match nothing"); excludes win over
//! includes. On top of the configured lists, [`TopicFilter::matches`] never selects a Kafka or
//! Connect internal topic (`__*`, `.*`, `*.internal`, `*-internal`, `*.replica`), whatever the
//! configuration says. The rules that depend on the replication policy (heartbeats are
//! replicated even when the filter leaves them out, cycle detection) live with the flow, see
//! [`crate::policy::ReplicationPolicy`].

use regex::Regex;

/// MM2's default for `topics`: every topic.
pub const DEFAULT_TOPICS: &[&str] = &[".*"];
/// MM2's default for `topics.exclude` (`DefaultTopicFilter.TOPICS_EXCLUDE_DEFAULT`).
pub const DEFAULT_TOPICS_EXCLUDE: &[&str] = &[r".*[\-\.]internal", r".*\.replica", "__.*"];
/// MM2's default for `groups`: every group.
pub const DEFAULT_GROUPS: &[&str] = &[".*"];
/// MM2's default for `groups.exclude` (`DefaultGroupFilter.GROUPS_EXCLUDE_DEFAULT`).
pub const DEFAULT_GROUPS_EXCLUDE: &[&str] = &["console-consumer-.*", "connect-.*", "__.*"];

/// Compiles one MM2 list item as a full-match regex (`^(?:item)$`), the equivalent of Java's
/// `Pattern.matcher(name).matches()`. The item is used as written, without trimming.
pub fn full_match_regex(item: &str) -> Result<Regex, regex::Error> {
    Regex::new(&format!("^(?:{item})$"))
}

/// Compiles a list of items with [`full_match_regex`].
pub fn full_match_regexes<S: AsRef<str>>(items: &[S]) -> Result<Vec<Regex>, regex::Error> {
    items
        .iter()
        .map(|item| full_match_regex(item.as_ref()))
        .collect()
}

fn any_matches(patterns: &[Regex], name: &str) -> bool {
    patterns.iter().any(|re| re.is_match(name))
}

fn same_patterns(a: &[Regex], b: &[Regex]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.as_str() == y.as_str())
}

/// True for names that are never replicated whatever the filter says: Kafka's own topics
/// (`__consumer_offsets`, `__transaction_state`, and anything else starting with `__` or
/// `.`), Connect and MM2 internal topics (`*.internal`, `*-internal`) and `*.replica`
/// (MM1-era replica topics, also in MM2's default `topics.exclude`). This is
/// `ReplicationPolicy.isInternalTopic` with the default separator, plus `*.replica`.
pub fn is_internal_topic_name(topic: &str) -> bool {
    topic.starts_with("__")
        || topic.starts_with('.')
        || topic.ends_with(".internal")
        || topic.ends_with("-internal")
        || topic.ends_with(".replica")
}

/// Which source topics a flow replicates: `topics` minus `topics.exclude`, never internal
/// topics.
#[derive(Clone, Debug)]
pub struct TopicFilter {
    /// Anchored regexes from `topics`; a topic must fully match one of them.
    pub include: Vec<Regex>,
    /// Anchored regexes from `topics.exclude`; a topic that fully matches one is skipped.
    pub exclude: Vec<Regex>,
}

impl TopicFilter {
    /// Builds a filter from MM2-style list items (each one a regex, matched in full).
    pub fn new<S: AsRef<str>>(include: &[S], exclude: &[S]) -> Result<Self, regex::Error> {
        Ok(TopicFilter {
            include: full_match_regexes(include)?,
            exclude: full_match_regexes(exclude)?,
        })
    }

    /// True if the flow should replicate `topic`: included, not excluded, not internal.
    pub fn matches(&self, topic: &str) -> bool {
        any_matches(&self.include, topic)
            && !any_matches(&self.exclude, topic)
            && !is_internal_topic_name(topic)
    }

    /// 8 hex digits that tell filters apart (CRC-32C of the patterns as written, in order):
    /// the same on every process and release for the same configuration.
    pub fn fingerprint(&self) -> String {
        let mut text = String::new();
        for (list, regexes) in [("include", &self.include), ("exclude", &self.exclude)] {
            text.push_str(list);
            for r in regexes.iter() {
                text.push('\n');
                text.push_str(r.as_str());
            }
            text.push('\n');
        }
        format!("{:08x}", crc32c::crc32c(text.as_bytes()))
    }
}

impl Default for TopicFilter {
    /// MM2's defaults: `topics = .*`, `topics.exclude = .*[\-\.]internal, .*\.replica, __.*`.
    fn default() -> Self {
        TopicFilter::new(DEFAULT_TOPICS, DEFAULT_TOPICS_EXCLUDE).expect("default topic regexes")
    }
}

impl PartialEq for TopicFilter {
    /// Two filters are equal when their regexes are written the same way.
    fn eq(&self, other: &Self) -> bool {
        same_patterns(&self.include, &other.include) && same_patterns(&self.exclude, &other.exclude)
    }
}

/// Which consumer groups a flow checkpoints and syncs: `groups` minus `groups.exclude`.
#[derive(Clone, Debug)]
pub struct GroupFilter {
    /// Anchored regexes from `groups`; a group must fully match one of them.
    pub include: Vec<Regex>,
    /// Anchored regexes from `groups.exclude`; a group that fully matches one is skipped.
    pub exclude: Vec<Regex>,
}

impl GroupFilter {
    /// Builds a filter from MM2-style list items (each one a regex, matched in full).
    pub fn new<S: AsRef<str>>(include: &[S], exclude: &[S]) -> Result<Self, regex::Error> {
        Ok(GroupFilter {
            include: full_match_regexes(include)?,
            exclude: full_match_regexes(exclude)?,
        })
    }

    /// True if the flow should checkpoint `group`: included and not excluded.
    pub fn matches(&self, group: &str) -> bool {
        any_matches(&self.include, group) && !any_matches(&self.exclude, group)
    }
}

impl Default for GroupFilter {
    /// MM2's defaults: `groups = .*`, `groups.exclude = console-consumer-.*, connect-.*, __.*`.
    fn default() -> Self {
        GroupFilter::new(DEFAULT_GROUPS, DEFAULT_GROUPS_EXCLUDE).expect("default group regexes")
    }
}

impl PartialEq for GroupFilter {
    /// Two filters are equal when their regexes are written the same way.
    fn eq(&self, other: &Self) -> bool {
        same_patterns(&self.include, &other.include) && same_patterns(&self.exclude, &other.exclude)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fingerprint names the fencing transactional id: the same filter gives the same
    /// value on every process and release (pinned here), another filter another value.
    #[test]
    fn fingerprint_is_stable_and_tells_filters_apart() {
        let f = |inc: &[&str], exc: &[&str]| TopicFilter::new(inc, exc).unwrap().fingerprint();
        assert_eq!(f(&["orders"], &[]), f(&["orders"], &[]));
        assert_eq!(f(&["orders"], &[]).len(), 8);
        assert_ne!(f(&["orders"], &[]), f(&["payments"], &[]));
        assert_ne!(f(&["orders"], &[]), f(&[], &["orders"]));
        assert_ne!(f(&["a", "b"], &[]), f(&["a,b"], &[]));
        assert_eq!(TopicFilter::default().fingerprint(), "2e3573c2");
    }
    use proptest::prelude::*;

    #[test]
    fn default_topic_filter_matches_mm2() {
        let f = TopicFilter::default();
        for topic in [
            "orders",
            "a.b.c",
            "source.orders",
            "heartbeats",
            "x-internal-y",
        ] {
            assert!(f.matches(topic), "{topic}");
        }
        for topic in [
            "__consumer_offsets",
            "__transaction_state",
            "mm2-offset-syncs.target.internal",
            "source.checkpoints.internal",
            "connect-configs-internal",
            "orders.replica",
            ".hidden",
        ] {
            assert!(!f.matches(topic), "{topic}");
        }
    }

    #[test]
    fn regexes_are_full_matches() {
        let f = TopicFilter::new(&["foo", "bar.*"], &[]).unwrap();
        assert!(f.matches("foo"));
        assert!(!f.matches("foobar"));
        assert!(!f.matches("xfoo"));
        assert!(f.matches("bar"));
        assert!(f.matches("barista"));
        assert!(!f.matches("rebar"));
        // An item with its own alternation stays inside its anchors.
        let f = TopicFilter::new(&["a|b"], &[]).unwrap();
        assert!(f.matches("a") && f.matches("b") && !f.matches("ab"));
    }

    #[test]
    fn exclude_wins_over_include() {
        let f = TopicFilter::new(&["orders.*"], &["orders-test"]).unwrap();
        assert!(f.matches("orders-prod"));
        assert!(!f.matches("orders-test"));
    }

    #[test]
    fn empty_include_matches_nothing() {
        let f = TopicFilter::new::<&str>(&[], &[]).unwrap();
        assert!(!f.matches("orders"));
        let g = GroupFilter::new::<&str>(&[], &[]).unwrap();
        assert!(!g.matches("app"));
    }

    #[test]
    fn internal_topics_are_never_replicated_even_when_included() {
        let f = TopicFilter::new(&[".*"], &[]).unwrap();
        assert!(f.matches("orders"));
        for topic in [
            "__consumer_offsets",
            ".x",
            "a.internal",
            "a-internal",
            "a.replica",
        ] {
            assert!(!f.matches(topic), "{topic}");
        }
    }

    #[test]
    fn default_group_filter_matches_mm2() {
        let g = GroupFilter::default();
        assert!(g.matches("billing"));
        assert!(g.matches("connector-x"));
        assert!(!g.matches("console-consumer-1234"));
        assert!(!g.matches("connect-mirror"));
        assert!(!g.matches("__internal"));
    }

    #[test]
    fn invalid_regex_is_an_error() {
        assert!(TopicFilter::new(&["("], &[]).is_err());
        assert!(GroupFilter::new(&["ok"], &["[z-a]"]).is_err());
    }

    #[test]
    fn equality_compares_pattern_text() {
        assert_eq!(TopicFilter::default(), TopicFilter::default());
        assert_ne!(
            TopicFilter::default(),
            TopicFilter::new(&["x"], DEFAULT_TOPICS_EXCLUDE).unwrap()
        );
        assert_eq!(GroupFilter::default(), GroupFilter::default());
    }

    proptest! {
        #[test]
        fn literal_items_match_only_themselves(
            name in "[a-z][a-z0-9_-]{0,20}",
            other in "[a-z][a-z0-9_-]{0,20}",
        ) {
            let no_excludes: &[String] = &[];
            let f = TopicFilter::new(&[regex::escape(&name)], no_excludes).unwrap();
            prop_assert!(f.matches(&name));
            prop_assert_eq!(f.matches(&other), other == name);
        }
    }
}
