// Starts the Swagger UI viewer on the Postmill OpenAPI document. It lives in a file of its own, not inline,
// so the page's Content-Security-Policy can stay script-src 'self'.
"use strict";
(function () {
  var root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.dataset.specUrl,
    domNode: root,
    deepLinking: true,
    docExpansion: "list",
    defaultModelsExpandDepth: 0,
    displayRequestDuration: true,
    // No call to validator.swagger.io: the page makes no request beyond its own origin.
    validatorUrl: null,
  });
})();
