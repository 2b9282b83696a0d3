from tests.conftest import Project
from tests.factories import case, define_suite, start_evaluation


async def test_flow(project: Project, client) -> None:
    headers = await project.admin()
    suite = await define_suite(client, headers)
    assert suite["status"] == "active"
    evaluation = await start_evaluation(client, headers)
    assert evaluation["expected_cases"] == 12 + 12 + 24
    response = await client.post(
        f"/api/v1/evaluations/{evaluation['evaluation_id']}/cases",
        json={"cases": [case("accuracy", "e00", output={"answer": "x"})]},
        headers=headers,
    )
    assert response.status_code == 200, response.text
    assert response.json() == {"accepted": 1, "unchanged": 0}
