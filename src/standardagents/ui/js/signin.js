// Sign-in through the identity provider, when the server trusts one (authorization code with
// PKCE): the browser goes to the provider with a code challenge and comes back with a code,
// which the server exchanges (so this page talks to its own origin only). The access token
// is kept where the API client reads it; without a provider the page works as before.
import { API } from "./api.js";
import { $ } from "./state.js";

const VERIFIER = "sa-pkce-verifier";
const STATE = "sa-pkce-state";
const USER = "sa-user";

function b64url(bytes) {
  return btoa(String.fromCharCode(...new Uint8Array(bytes))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function random() {
  return b64url(crypto.getRandomValues(new Uint8Array(32)));
}

function redirectUri() {
  return `${location.origin}/`;
}

async function signIn(config) {
  const verifier = random();
  const state = random();
  sessionStorage.setItem(VERIFIER, verifier);
  sessionStorage.setItem(STATE, state);
  const challenge = b64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
  const url = new URL(config.authorizationEndpoint);
  url.search = new URLSearchParams({
    response_type: "code", client_id: config.clientId, redirect_uri: redirectUri(), scope: config.scopes,
    state, code_challenge: challenge, code_challenge_method: "S256",
  }).toString();
  location.assign(url.toString());
}

// Back from the provider with a code: exchange it (checking the state this page sent).
async function complete(params) {
  const expected = sessionStorage.getItem(STATE);
  const verifier = sessionStorage.getItem(VERIFIER);
  sessionStorage.removeItem(STATE);
  sessionStorage.removeItem(VERIFIER);
  history.replaceState(null, "", location.pathname);
  if (!verifier || params.get("state") !== expected) {
    throw new Error("this sign-in answer does not match a sign-in started here: sign in again");
  }
  const response = await fetch(`${API}/auth/token`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ code: params.get("code"), codeVerifier: verifier, redirectUri: redirectUri() }),
  });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error.message);
  localStorage.setItem("sa-token", body.accessToken);
  localStorage.setItem(USER, body.user.name);
}

function show(config) {
  const button = $("sign-in");
  const who = $("signed-in");
  const name = localStorage.getItem(USER);
  who.textContent = name ? `Signed in as ${name}` : "";
  who.hidden = !name;
  button.textContent = name ? "Sign in again" : "Sign in";
  button.hidden = false;
  button.onclick = () => signIn(config);
}

// Called once before the app starts: finishes a sign-in in progress and offers the button.
export async function boot() {
  const params = new URLSearchParams(location.search);
  if (params.has("code")) await complete(params);
  const response = await fetch(`${API}/auth/config`);
  if (!response.ok) return;
  const config = await response.json();
  if (config.oidc) show(config);
}
