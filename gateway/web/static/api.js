// The public API over fetch: JSON in and out, errors as ApiError with the server's tag.

export class ApiError extends Error {
  /** *bearer*: the answer is a 401 asking for a bearer token (a token server's page, not
   * signed in: see docs/web.md, "Authentication"). */
  constructor(status, tag, message, bearer = false) {
    super(message);
    this.status = status;
    this.tag = tag;
    this.bearer = bearer;
  }
}

/** Call *path* (relative to the page) with *method* and a JSON *body*; the decoded answer,
 * null for 204. Throws ApiError for an error answer, TypeError when unreachable. */
export async function api(path, { method = "GET", body } = {}) {
  const init = { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(here(path), init);
  if (response.status === 204) return null;
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const tag = data?._tag ?? data?.name ?? "HttpError";
    const message = data?.message ?? data?.data?.message ?? `HTTP ${response.status}`;
    const bearer = response.status === 401 && /\bbearer\b/i.test(response.headers.get("www-authenticate") ?? "");
    throw new ApiError(response.status, tag, message, bearer);
  }
  return data;
}

export const enc = encodeURIComponent;

/** *path* resolved against the page's address without the user name and password it may
 * carry (fetch refuses a URL with credentials; the browser sends the ones it was given). */
export function here(path) {
  return new URL(path, location.origin + location.pathname).href;
}

/** The seq a messages cursor (`desc:<seq>`, see docs/web.md) stands at, or null. */
export function cursorSeq(cursor) {
  const found = /^(?:asc|desc):(\d+)$/.exec(cursor || "");
  return found ? Number(found[1]) : null;
}
