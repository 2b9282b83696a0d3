// Type-checked by tests/clients/test_generated_clients.py against the types openapi-typescript
// generated from the served document (schema.d.ts, beside this file in the test's folder).
import createClient from "openapi-fetch";
import type { components, paths } from "./schema.d.ts";

type CaseIn = components["schemas"]["CaseIn"];

export async function startAndSend(baseUrl: string, token: string): Promise<string> {
  const client = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${token}` } });
  const started = await client.POST("/api/v1/evaluations", {
    body: {
      subject: { digest: "sha1:4f1c0a7e9b2d3c5e6f708192a3b4c5d6e7f80912" },
      suite: { name: "arithmetic" },
      mode: "gate",
      execution_mode: "external",
    },
  });
  if (!started.data) throw new Error("not started");
  const evaluationId = started.data.evaluation_id;
  const cases: CaseIn[] = [
    { check_id: "accuracy", example_id: "q1", repeat: 0, status: "pass", output: { answer: "4" } },
  ];
  await client.POST("/api/v1/evaluations/{evaluation_id}/cases", {
    params: { path: { evaluation_id: evaluationId } },
    body: { cases },
  });
  const finished = await client.POST("/api/v1/evaluations/{evaluation_id}/finish", {
    params: { path: { evaluation_id: evaluationId } },
  });
  return finished.data ? finished.data.body.result : "no report";
}
