//! What a piece of code logged: a `tracing` subscriber that keeps every event, with its
//! fields, as text, so that a test can assert a warning was given or that no secret was
//! ever written.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use tracing_subscriber::fmt::MakeWriter;

/// The captured log text of the thread (or current-thread runtime) it is installed on.
/// Dropping it uninstalls the subscriber.
pub struct LogCapture {
    text: Arc<Mutex<Vec<u8>>>,
    _guard: tracing::subscriber::DefaultGuard,
}

impl LogCapture {
    /// Installs a subscriber that keeps every event at `TRACE` and above as a line of
    /// text (level, target, message and fields, spans' fields included), as the thread's
    /// default until the capture is dropped. Events of other threads are not seen: use it
    /// in `#[tokio::test]` (a current-thread runtime).
    pub fn start() -> LogCapture {
        let text = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(SharedBuffer(text.clone()))
            .finish();
        LogCapture {
            text,
            _guard: tracing::subscriber::set_default(subscriber),
        }
    }

    /// Everything logged so far.
    pub fn text(&self) -> String {
        let bytes = self.text.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// A writer appending to one shared buffer.
#[derive(Clone)]
struct SharedBuffer(Arc<Mutex<Vec<u8>>>);

impl Write for SharedBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for SharedBuffer {
    type Writer = SharedBuffer;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}
