use super::shell_word;

#[test]
fn a_word_for_a_shell_is_quoted_unless_it_is_plain() {
    assert_eq!(
        shell_word("http://127.0.0.1:50051"),
        "http://127.0.0.1:50051"
    );
    assert_eq!(shell_word("call_1; rm -rf ~"), "'call_1; rm -rf ~'");
    assert_eq!(shell_word("it's $(x)"), r"'it'\''s $(x)'");
    assert_eq!(shell_word("=cmd"), "'=cmd'", "zsh expands a leading =");
    assert_eq!(shell_word(""), "''");
}
