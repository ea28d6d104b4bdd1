// A real OpenID Provider for the console's SSO tests: panva's certified oidc-provider, with its
// development sign-in pages (any login name signs in as that account). Configured by the
// environment, it prints "listening <issuer>" once it serves:
//   OIDC_PORT             port on 127.0.0.1 (0: any free one)
//   OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_REDIRECT_URIS (comma-separated),
//   OIDC_POST_LOGOUT_REDIRECT_URIS (comma-separated)
//   OIDC_ACCOUNTS         a JSON file {account: {"email": …, "groups": [...]}}, read at each
//                         sign-in, so a test can take a user out of a group between two logins
//   OIDC_CLOCK_OFFSET_S   shifts this provider's clock (a provider whose tokens are expired)
import { generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';

const offsetMs = Number(process.env.OIDC_CLOCK_OFFSET_S || '0') * 1000;
if (offsetMs) {
  const realNow = Date.now.bind(Date);
  Date.now = () => realNow() + offsetMs;
}

const { default: Provider } = await import('oidc-provider');

const list = (name) => (process.env[name] || '').split(',').map((s) => s.trim()).filter(Boolean);
const accounts = () => JSON.parse(readFileSync(process.env.OIDC_ACCOUNTS, 'utf8'));
const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'test-key-1', use: 'sig', alg: 'RS256' };

const client = (clientId, clientSecret) => ({
  client_id: clientId,
  client_secret: clientSecret,
  redirect_uris: list('OIDC_REDIRECT_URIS'),
  post_logout_redirect_uris: list('OIDC_POST_LOGOUT_REDIRECT_URIS'),
  grant_types: ['authorization_code'],
  response_types: ['code'],
  token_endpoint_auth_method: 'client_secret_post',
});

const configuration = {
  // The console's client, and another application of the same provider (whose ID tokens
  // the console must refuse: they are not for it).
  clients: [
    client(process.env.OIDC_CLIENT_ID, process.env.OIDC_CLIENT_SECRET),
    client(`${process.env.OIDC_CLIENT_ID}-other-app`, `${process.env.OIDC_CLIENT_SECRET}-other`),
  ],
  jwks: { keys: [jwk] },
  // PKCE for every client, confidential ones too: a login without it fails at the provider.
  pkce: { required: () => true },
  scopes: ['openid', 'email', 'profile', 'groups'],
  claims: { openid: ['sub'], email: ['email'], profile: ['preferred_username', 'name'], groups: ['groups'] },
  // The claims of the granted scopes go into the ID token itself (where the console reads them).
  conformIdTokenClaims: false,
  features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
  ttl: { IdToken: 600, AccessToken: 600, AuthorizationCode: 60, Session: 7200, Interaction: 7200, Grant: 7200 },
  async findAccount(ctx, id) {
    const account = accounts()[id];
    if (!account) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, preferred_username: id, email: account.email, groups: account.groups || [] };
      },
    };
  },
};

const port = Number(process.env.OIDC_PORT || '0');
const server = (await import('node:http')).createServer();
server.listen(port, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, configuration);
  provider.proxy = false;
  server.on('request', provider.callback());
  console.log(`listening ${issuer}`);
});
