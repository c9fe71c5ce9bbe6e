//! Property tests (a fuzzer's job on stable Rust): the error-position parser takes arbitrary
//! text without panicking and keeps its promises. `make test` runs the default number of
//! cases; run longer with e.g.
//! `PROPTEST_CASES=200000 cargo test --release -p agentic-sandbox properties`.

use proptest::prelude::*;

use crate::position::{CODE_FILE, parse_position};

proptest! {
    #[test]
    fn the_position_parser_takes_any_stack(stack in any::<String>()) {
        let _ = parse_position(&stack);
    }

    #[test]
    fn the_first_frame_in_the_code_gives_the_position(
        function in "[a-zA-Z_][a-zA-Z0-9_]{0,12}",
        line in 1u32..100_000,
        column in 1u32..10_000,
        other_line in 1u32..100,
        native_frames in 0usize..3,
    ) {
        let mut stack = String::from("Error: boom\n");
        for _ in 0..native_frames {
            stack.push_str("    at toolCall (native)\n");
        }
        // Another file whose name ends like ours is not ours.
        stack.push_str(&format!("    at helper (my{CODE_FILE}:{other_line}:1)\n"));
        stack.push_str(&format!("    at {function} ({CODE_FILE}:{line}:{column})\n"));
        stack.push_str(&format!("    at {CODE_FILE}:{other_line}:2\n"));
        let position = parse_position(&stack).expect("a position");
        prop_assert_eq!((position.line, position.column), (line, column));
    }

    #[test]
    fn a_stack_without_the_code_has_no_position(
        frames in proptest::collection::vec("[a-z]{1,8} \\((native|lib\\.js:[0-9]{1,3}:[0-9]{1,3})\\)", 0..6)
    ) {
        let stack: String = frames.iter().map(|frame| format!("    at {frame}\n")).collect();
        prop_assert!(parse_position(&stack).is_none());
    }
}
