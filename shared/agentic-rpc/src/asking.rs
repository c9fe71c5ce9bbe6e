//! Serving a call that asks its caller for decisions while it runs (`RunCodeLive`): the caller's first message started it; the work sends each question as an
//! update and waits for the answer that comes back on the input stream; its result is the
//! last update. The work runs in a task the answer stream owns: a caller that hangs up drops
//! the stream, which aborts the task and the work with it.

use std::collections::HashMap;
use std::pin::Pin;

use tokio::sync::{mpsc, oneshot};
use tokio_stream::StreamExt as _;
use tracing::Instrument as _;

/// Questions asked and updates waiting to be sent, at most.
const BUFFER: usize = 8;

/// The updates of an asking call: questions, then the answer.
pub type AskingStream<U> =
    Pin<Box<dyn tokio_stream::Stream<Item = Result<U, tonic::Status>> + Send + 'static>>;

/// Where the work asks a question (`Q`, named by its id) and where its answer (`A`) goes.
pub type Questions<Q, A> = mpsc::Sender<(String, Q, oneshot::Sender<A>)>;

/// How one asking call's messages read: which input answers which question, and what the
/// caller is sent.
pub trait Asking: Send + 'static {
    type Input: Send + 'static;
    type Question: Send + 'static;
    type Answer: Send + 'static;
    type Done: Send + 'static;
    type Update: Send + 'static;

    /// The answer an input carries, with the id of the question it answers; `None` for any
    /// other input (ignored).
    fn answer(input: Self::Input) -> Option<(String, Self::Answer)>;
    /// The update that asks `question`.
    fn ask(question: Self::Question) -> Self::Update;
    /// The last update: the work's result.
    fn done(done: Self::Done) -> Self::Update;
}

/// Runs `work` (given where to ask) in a task, and answers its questions from `inputs` (the
/// rest of the caller's stream). A question asked after the inputs ended, or left without
/// an answer when they do, sees its answer dropped.
pub fn serve_asking<K, F>(
    mut inputs: tonic::Streaming<K::Input>,
    work: impl FnOnce(Questions<K::Question, K::Answer>) -> F,
) -> AskingStream<K::Update>
where
    K: Asking,
    F: Future<Output = Result<K::Done, tonic::Status>> + Send + 'static,
{
    let (updates, receiver) = mpsc::channel(BUFFER);
    let (questions, mut asked) = mpsc::channel(BUFFER);
    let work = work(questions);
    let task = tokio::spawn(
        async move {
            tokio::pin!(work);
            let mut waiting: HashMap<String, oneshot::Sender<K::Answer>> = HashMap::new();
            let mut inputs_open = true;
            let done = loop {
                tokio::select! {
                    done = &mut work => break done.map(K::done),
                    Some((id, question, answer)) = asked.recv() => {
                        if !inputs_open {
                            // Nobody can answer: dropping `answer` says so.
                            continue;
                        }
                        waiting.insert(id, answer);
                        if updates.send(Ok(K::ask(question))).await.is_err() {
                            return;
                        }
                    }
                    input = inputs.message(), if inputs_open => match input {
                        Ok(Some(input)) => {
                            // An answer to a question nobody waits on is dropped.
                            if let Some((id, answer)) = K::answer(input)
                                && let Some(waiter) = waiting.remove(&id)
                            {
                                let _ = waiter.send(answer);
                            }
                        }
                        Ok(None) | Err(_) => {
                            inputs_open = false;
                            waiting.clear();
                        }
                    },
                }
            };
            let _ = updates.send(done).await;
        }
        .instrument(tracing::Span::current()),
    );
    let owner = AbortOnDrop(task.abort_handle());
    let stream = tokio_stream::wrappers::ReceiverStream::new(receiver).map(move |update| {
        let _owned = &owner;
        update
    });
    Box::pin(stream)
}

/// Aborts a task when the stream that owns it is dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
