//! Progress of long operations (loading a big fleet, computing plans, generating a
//! fleet) on stderr, only when stderr is a terminal: piped or redirected, nothing is
//! written, so a script's output is what it was before. The bar is cleared when the
//! operation ends; it never touches stdout.

use std::borrow::Cow;
use std::io::IsTerminal as _;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often a spinner redraws while its operation gives no news.
const TICK: Duration = Duration::from_millis(120);

/// One operation's progress: a spinner, or a bar when the number of steps is known.
/// Inert (draws nothing) when stderr is not a terminal.
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A spinner saying `message` with the time elapsed.
    pub fn spinner(message: impl Into<Cow<'static, str>>) -> Self {
        Self::start(None, message.into())
    }

    /// A bar of `steps` steps saying `message`.
    pub fn bar(steps: u64, message: impl Into<Cow<'static, str>>) -> Self {
        Self::start(Some(steps), message.into())
    }

    fn start(steps: Option<u64>, message: Cow<'static, str>) -> Self {
        if !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let (bar, template) = match steps {
            Some(n) => (
                ProgressBar::new(n),
                "{spinner} {msg} [{bar:30}] {pos}/{len} ({elapsed})",
            ),
            None => (ProgressBar::new_spinner(), "{spinner} {msg} ({elapsed})"),
        };
        bar.set_draw_target(ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(message);
        bar.enable_steady_tick(TICK);
        Progress { bar: Some(bar) }
    }

    /// One step done.
    pub fn inc(&self) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
    }

    /// Changes what the line says.
    pub fn say(&self, message: impl Into<Cow<'static, str>>) {
        if let Some(bar) = &self.bar {
            bar.set_message(message);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
