//! Where `chat` reads its lines (prompts and answers to permission questions): a line editor
//! with a history file on a terminal (feature `line-editing`), else plain lines of stdin.

use std::io::Write;
use std::sync::Arc;

use crate::console::StdinLines;

/// One read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Read {
    Line(String),
    /// Ctrl-C at the prompt (line editor only).
    #[cfg_attr(not(feature = "line-editing"), allow(dead_code))]
    Interrupted,
    /// Ctrl-D, or the end of input.
    Eof,
}

/// A source of lines.
#[derive(Clone)]
pub(crate) enum LineInput {
    /// Lines of stdin; the prompt is printed on stderr.
    Plain(Arc<StdinLines>),
    /// A line editor on the terminal, running on a thread of its own.
    #[cfg(feature = "line-editing")]
    Editor(editor::EditorHandle),
}

impl LineInput {
    /// The line editor when stdin and stderr are terminals (history in `history_file`), else
    /// plain lines of stdin.
    #[cfg_attr(
        not(feature = "line-editing"),
        allow(
            clippy::needless_pass_by_value,
            reason = "the history file is the editor's"
        )
    )]
    pub(crate) fn open(history_file: Option<std::path::PathBuf>) -> Self {
        #[cfg(feature = "line-editing")]
        {
            use std::io::IsTerminal;
            if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
                match editor::EditorHandle::start(history_file) {
                    Ok(editor) => return Self::Editor(editor),
                    Err(error) => tracing::warn!(%error, "no line editor; reading plain lines"),
                }
            }
        }
        #[cfg(not(feature = "line-editing"))]
        let _ = history_file;
        Self::Plain(Arc::new(StdinLines::default()))
    }

    /// Shows `prompt` and reads one line (without its line ending).
    pub(crate) async fn read(&self, prompt: &str) -> Read {
        match self {
            Self::Plain(lines) => {
                if !prompt.is_empty() {
                    eprint!("{prompt}");
                    let _ = std::io::stderr().flush();
                }
                match lines.next_line().await {
                    Some(line) => Read::Line(line.trim_end_matches(['\n', '\r']).to_owned()),
                    None => Read::Eof,
                }
            }
            #[cfg(feature = "line-editing")]
            Self::Editor(editor) => editor.read(prompt).await,
        }
    }

    /// Whether a person types the lines (they are echoed by the terminal).
    pub(crate) fn is_terminal(&self) -> bool {
        match self {
            Self::Plain(_) => std::io::IsTerminal::is_terminal(&std::io::stdin()),
            #[cfg(feature = "line-editing")]
            Self::Editor(_) => true,
        }
    }
}

#[cfg(feature = "line-editing")]
mod editor {
    use std::path::PathBuf;

    use rustyline::error::ReadlineError;
    use rustyline::history::DefaultHistory;
    use rustyline::{Config, Editor};
    use tokio::sync::{mpsc, oneshot};

    use super::Read;

    type Request = (String, oneshot::Sender<Read>);

    /// Sends prompts to the editor thread; the thread ends when every handle is dropped.
    #[derive(Clone)]
    pub(crate) struct EditorHandle {
        requests: mpsc::UnboundedSender<Request>,
    }

    impl EditorHandle {
        pub(crate) fn start(history_file: Option<PathBuf>) -> anyhow::Result<Self> {
            let config = Config::builder().max_history_size(1000)?.build();
            let mut editor: Editor<(), DefaultHistory> = Editor::with_config(config)?;
            if let Some(file) = &history_file
                && file.exists()
                && let Err(error) = editor.load_history(file)
            {
                tracing::warn!(%error, file = %file.display(), "cannot read the chat history");
            }
            let (requests, mut receiver) = mpsc::unbounded_channel::<Request>();
            std::thread::Builder::new()
                .name("line-editor".into())
                .spawn(move || {
                    while let Some((prompt, reply)) = receiver.blocking_recv() {
                        let read = read_line(&mut editor, &prompt, history_file.as_ref());
                        let _ = reply.send(read);
                    }
                })?;
            Ok(Self { requests })
        }

        pub(crate) async fn read(&self, prompt: &str) -> Read {
            let (reply, answer) = oneshot::channel();
            if self.requests.send((prompt.to_owned(), reply)).is_err() {
                return Read::Eof;
            }
            answer.await.unwrap_or(Read::Eof)
        }
    }

    fn read_line(
        editor: &mut Editor<(), DefaultHistory>,
        prompt: &str,
        history_file: Option<&PathBuf>,
    ) -> Read {
        loop {
            return match editor.readline(prompt) {
                Ok(line) => {
                    // Answers to questions (y/n) are not worth remembering.
                    if line.trim().chars().count() > 3 {
                        let _ = editor.add_history_entry(line.as_str());
                        if let Some(file) = history_file
                            && let Err(error) = save(editor, file)
                        {
                            tracing::warn!(%error, "cannot write the chat history");
                        }
                    }
                    Read::Line(line)
                }
                Err(ReadlineError::Interrupted) => Read::Interrupted,
                Err(ReadlineError::Signal(_)) => continue,
                Err(ReadlineError::Eof) => Read::Eof,
                Err(error) => {
                    tracing::warn!(%error, "cannot read the terminal");
                    Read::Eof
                }
            };
        }
    }

    fn save(editor: &mut Editor<(), DefaultHistory>, file: &PathBuf) -> anyhow::Result<()> {
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)?;
        }
        editor.save_history(file)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))?;
        }
        Ok(())
    }
}
