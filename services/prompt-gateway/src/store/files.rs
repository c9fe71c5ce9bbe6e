//! Files: the file outputs of a conversation's prompts.

use super::*;

impl Store {
    /// Every file output of a conversation's prompts, in prompt and timeline order.
    pub async fn conversation_files(
        &self,
        user_id: &UserId,
        conversation_id: &ConversationId,
    ) -> Result<Vec<(PromptId, FileOutput)>, GatewayError> {
        let sql = "SELECT f.prompt_id, f.payload FROM prompt_files f JOIN prompts p ON p.id = f.prompt_id \
             WHERE f.user_id = $1 AND f.conversation_id = $2 ORDER BY p.created_at, p.id, f.position";
        let rows: Vec<(String, Vec<u8>)> = self
            .db
            .read_all(sql, &[user_id.into(), conversation_id.into()])
            .await?;
        rows.into_iter()
            .map(|(prompt_id, payload)| {
                Ok((
                    PromptId::known(prompt_id),
                    FileOutput::decode(payload.as_slice())?,
                ))
            })
            .collect()
    }

    /// A file output by id, if it belongs to `user_id`.
    pub async fn file(
        &self,
        user_id: &UserId,
        file_id: &str,
    ) -> Result<Option<FileOutput>, GatewayError> {
        let sql = "SELECT payload FROM prompt_files WHERE file_id = $1 AND user_id = $2";
        let payload: Option<Vec<u8>> = self
            .db
            .read_scalar(sql, &[file_id.into(), user_id.into()])
            .await?;
        Ok(payload
            .map(|payload| FileOutput::decode(payload.as_slice()))
            .transpose()?)
    }
}
