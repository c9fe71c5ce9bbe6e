//! What every call to the gateway carries to say who calls: the user (`x-user-id`, which only
//! a gateway in dev mode believes) or a bearer token.

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::{Request, Status};

/// The header that names the user to a gateway in dev mode.
pub const USER_HEADER: &str = "x-user-id";
const AUTHORIZATION_HEADER: &str = "authorization";

/// What every call carries to say who calls.
#[derive(Clone, Default)]
pub(crate) struct Credentials {
    pub(crate) user: Option<MetadataValue<Ascii>>,
    pub(crate) bearer: Option<MetadataValue<Ascii>>,
}

impl Interceptor for Credentials {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(user) = &self.user {
            request.metadata_mut().insert(USER_HEADER, user.clone());
        }
        if let Some(bearer) = &self.bearer {
            request
                .metadata_mut()
                .insert(AUTHORIZATION_HEADER, bearer.clone());
        }
        Ok(request)
    }
}
