// The public API over fetch: JSON in and out, errors as ApiError with the server's tag.

export class ApiError extends Error {
  constructor(status, tag, message) {
    super(message);
    this.status = status;
    this.tag = tag;
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
    throw new ApiError(response.status, tag, message);
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
