// The service's refusals as typed errors: each carries the status and the API's `detail`
// (what to fix), so callers can catch the kind they handle.

export class NexusError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(`${status}: ${detail}`);
    this.name = new.target.name;
  }
}

export class UnauthorizedError extends NexusError {}
export class ForbiddenError extends NexusError {}
export class NotFoundError extends NexusError {}
export class ConflictError extends NexusError {}
export class TooLargeError extends NexusError {}
export class InvalidInputError extends NexusError {}
export class LLMFailedError extends NexusError {}
export class StorageFullError extends NexusError {}
/** The service, or one it needs, does not answer (status 0: no connection at all). */
export class UnavailableError extends NexusError {}

const BY_STATUS: Record<number, new (status: number, detail: string) => NexusError> = {
  401: UnauthorizedError,
  403: ForbiddenError,
  404: NotFoundError,
  409: ConflictError,
  413: TooLargeError,
  415: InvalidInputError,
  422: InvalidInputError,
  502: LLMFailedError,
  503: UnavailableError,
  507: StorageFullError,
};

export function errorFor(status: number, detail: string): NexusError {
  const Kind = BY_STATUS[status] ?? NexusError;
  return new Kind(status, detail);
}
