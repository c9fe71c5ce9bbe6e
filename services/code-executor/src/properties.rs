//! Property tests (a fuzzer's job on stable Rust): the model reply → code extraction takes
//! arbitrary text without panicking and keeps its promises. `make test` runs the default
//! number of cases; run longer with e.g.
//! `PROPTEST_CASES=200000 cargo test --release -p code-executor properties`.

use proptest::prelude::*;

use crate::prompt::extract_code;

/// Text without backticks: what the model writes around and inside a fence.
fn plain() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[^`]{0,200}").unwrap()
}

proptest! {
    #[test]
    fn extraction_takes_any_reply(reply in any::<String>()) {
        let code = extract_code(&reply);
        prop_assert!(code.len() <= reply.len());
    }

    #[test]
    fn extraction_takes_any_markdown_like_reply(
        parts in proptest::collection::vec(
            prop_oneof![plain(), Just("```".to_owned()), Just("```js\n".to_owned()), Just("\n".to_owned())],
            0..12,
        )
    ) {
        let reply = parts.concat();
        let code = extract_code(&reply);
        prop_assert!(code.len() <= reply.len());
    }

    #[test]
    fn a_reply_without_fences_is_the_code(code in plain()) {
        prop_assert_eq!(extract_code(&code), code.trim());
    }

    #[test]
    fn the_fenced_block_is_the_code_whatever_prose_surrounds_it(
        before in plain(),
        tag in prop_oneof![Just(""), Just("js"), Just("javascript")],
        code in plain(),
        after in plain(),
    ) {
        let reply = format!("{before}\n```{tag}\n{code}\n```\n{after}");
        prop_assert_eq!(extract_code(&reply), code.trim());
    }
}
