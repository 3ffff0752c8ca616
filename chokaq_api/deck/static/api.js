// The REST API client: every call carries the token as a bearer header. The token lives in this tab's
// sessionStorage only: never in a cookie, a URL or localStorage.

const KEY = "chokaq.deck.token";
export const API = document.documentElement.dataset.api || "/api/v1";

export const session = {
  get token() { return sessionStorage.getItem(KEY); },
  set token(value) {
    if (value) sessionStorage.setItem(KEY, value);
    else sessionStorage.removeItem(KEY);
  },
};

export class ApiError extends Error {
  constructor(status, body) {
    const detail = body && body.errors ? ` ${JSON.stringify(body.errors)}` : "";
    super(`${(body && body.message) || `HTTP ${status}`}${detail}`);
    this.status = status;
    this.body = body;
  }
}

// Called with the failing ApiError when the token stops working (revoked, expired): the app signs out.
export const hooks = { unauthorized: () => {} };

function url(path, query) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query || {})) {
    if (value !== null && value !== undefined && value !== "") params.set(key, value);
  }
  const text = params.toString();
  return `${API}${path}${text ? `?${text}` : ""}`;
}

// Requests in flight, on <body data-busy>: lets a test (or a screen reader's user) know the view settled.
let inflight = 0;
function busy(delta) {
  inflight += delta;
  document.body.dataset.busy = String(inflight);
}

export async function api(method, path, options = {}) {
  busy(1);
  try {
    return await call(method, path, options);
  } finally {
    busy(-1);
  }
}

async function call(method, path, { query, body, token, signal } = {}) {
  const headers = { Authorization: `Bearer ${token || session.token}`, Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(url(path, query), {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "omit",
    cache: "no-store",
    signal,
  });
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = { message: text }; }
  if (!response.ok) {
    const error = new ApiError(response.status, data);
    if (response.status === 401 && !token) hooks.unauthorized(error);
    throw error;
  }
  const paging = response.headers.get("X-Pagination");
  return { data, pagination: paging ? JSON.parse(paging) : null, status: response.status };
}

export const get = (path, query, opts = {}) => api("GET", path, { ...opts, query });
export const post = (path, body, opts = {}) => api("POST", path, { ...opts, body });
export const patch = (path, body, opts = {}) => api("PATCH", path, { ...opts, body });
export const del = (path, opts = {}) => api("DELETE", path, opts);

export const REASONS = [
  "MaxRetriesExceeded", "Cancelled", "Zombie", "CircuitBreakerOpen", "Rejected", "Throttled", "Fatal",
  "Timeout", "Transient", "HeartbeatFailure", "RetryLifetimeExpired",
];
