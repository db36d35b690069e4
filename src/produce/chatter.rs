//! A bound on the per-partition lines one commit interval logs: when thousands of partitions
//! are refused at once (right after thousands of remote topics are created, the target
//! refuses each until it has loaded it; a broker restart at that scale), a line per
//! partition would bury everything else. Past the bound a kind of line goes to DEBUG, and
//! the next commit tick says in one line how many were held back.

use std::collections::BTreeMap;

/// Lines of one kind an interval logs at their own level.
const LINES_PER_INTERVAL: usize = 20;

/// The per-partition lines the engine bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Line {
    /// The target keeps refusing a partition (WARN).
    Refusing,
    /// A refused partition's fetching is paused (WARN).
    Paused,
    /// A paused partition is written again and its fetching resumes (INFO).
    Resumed,
}

impl Line {
    fn summary(self) -> &'static str {
        match self {
            // The per-partition lines' words, for whoever looks for them.
            Line::Refusing => {
                "the target keeps refusing the partitions counted here as well; their lines \
                 went to DEBUG"
            }
            Line::Paused => {
                "the target keeps refusing the partitions counted here as well: its fetching \
                 paused for each until the target writes it again; their lines went to DEBUG"
            }
            Line::Resumed => {
                "the target writes the partitions counted here again as well: fetching them \
                 resumes; their lines went to DEBUG"
            }
        }
    }
}

/// Lines of each kind asked for in this interval; those past [`LINES_PER_INTERVAL`] went to
/// DEBUG.
#[derive(Default)]
pub(super) struct Chatter {
    asked: BTreeMap<Line, usize>,
}

impl Chatter {
    /// Whether a line of `kind` may still go out at its own level in this interval; if not,
    /// it is counted for the summary.
    pub(super) fn may(&mut self, kind: Line) -> bool {
        let asked = self.asked.entry(kind).or_default();
        *asked += 1;
        *asked <= LINES_PER_INTERVAL
    }

    /// Ends the interval: logs how many lines of each kind were held back.
    pub(super) fn end_interval(&mut self) {
        for (kind, asked) in std::mem::take(&mut self.asked) {
            let held = asked.saturating_sub(LINES_PER_INTERVAL);
            match kind {
                _ if held == 0 => {}
                Line::Resumed => tracing::info!(partitions = held, "{}", kind.summary()),
                _ => tracing::warn!(partitions = held, "{}", kind.summary()),
            }
        }
    }

    #[cfg(test)]
    fn held(&self, kind: Line) -> usize {
        self.asked
            .get(&kind)
            .map_or(0, |asked| asked.saturating_sub(LINES_PER_INTERVAL))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_logs_its_bound_per_interval_and_counts_the_rest() {
        let mut chatter = Chatter::default();
        let refusing = (0..LINES_PER_INTERVAL + 5)
            .filter(|_| chatter.may(Line::Refusing))
            .count();
        assert_eq!(refusing, LINES_PER_INTERVAL);
        assert!(chatter.may(Line::Paused), "another kind has its own bound");
        assert_eq!(chatter.held(Line::Refusing), 5);
        assert_eq!(chatter.held(Line::Paused), 0);
        chatter.end_interval();
        assert_eq!(chatter.held(Line::Refusing), 0);
        assert!(chatter.may(Line::Refusing), "a new interval, a new bound");
    }
}
