// The page at /docs: Swagger UI on the OpenAPI document this node serves. Relative URLs, so it
// works behind a proxy that adds a path prefix; no validator badge (it would call out).
window.ui = SwaggerUIBundle({
  url: "v1/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  validatorUrl: null,
});
